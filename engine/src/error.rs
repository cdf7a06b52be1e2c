//! One error type for everything a user can get wrong or the numbers can break.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid data: {0}")]
    Data(String),
    #[error("checkpoint problem: {0}")]
    Checkpoint(String),
    #[error("non-finite {what} at step {step}; the run stopped and kept the weights of step {step}")]
    NonFinite { what: String, step: usize },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("json error: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, Error>;
