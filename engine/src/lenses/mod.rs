//! The lab's lenses on a real model: a text read through a loaded model (`reading`: every layer's
//! tokens on the sphere before and after LayerNorm's gain, every head's attention as a Markov chain
//! and against its Gaussian kernel, Brownian motion against the particles' flow through depth, the
//! next-token candidates, the raw tensors), the same reading as the page's own panels draw it
//! (`view`), its layer table as CSV (`table`), two texts side by side (`compare`), a model's
//! checkpoints along its training (`history`), the model's head read at every depth
//! (`logit_lens`), and in plain words (`words`). The forward pass
//! comes from the CPU (`reading::read`) or the GPU (`gpu::reader::GpuReader::read`), as a `Read`
//! of the text's tokens, the pass's cache and logits.

pub mod compare;
pub mod history;
pub mod logit_lens;
pub mod reading;
pub mod table;
pub mod view;
pub mod words;

pub use compare::{compare, Comparison, LayerChange};
pub use history::History;
pub use logit_lens::{logit_lens, LogitLens};
pub use reading::{
    dump, inspect, read, read_ids, tokens, tokens_within, DepthFit, HeadLens, Inspection, LayerLens, Read,
};
pub use view::{first_view, tokens_to_draw, view, with_depth, Reading};
