//! "Cancel" while the model works (a reading, its depth fits, a comparison, a writing): the model
//! worker is stopped, since a computation in a worker hears nothing until it ends, and the model
//! opens again from where it came (this browser's copy of a hub model, or the same files) without
//! reading. The text, the last reading on screen and the cached files stay.

use leptos::prelude::*;

use super::real_model::{self, Origin};
use super::{model_worker, Lab};

/// Stops what the model worker is doing, and opens the model again.
pub fn stop_work(lab: Lab) {
    let m = lab.real;
    model_worker::stop();
    real_model::refuse_waiting("cancelled: the model's work was stopped");
    m.comparing.cancelled();
    m.lensing.cancelled();
    let origin = m.origin.get_value();
    match origin {
        Some(Origin::Hub(id)) => {
            m.hub_id.set(id);
            real_model::fetch_hub(lab);
        }
        Some(Origin::Files(files)) => real_model::open_files(lab, files),
        None => m.busy.set(None),
    }
    // The opening just started brings the model back: it reads nothing by itself.
    m.quiet.set_value(m.opening_number());
    m.message.set(Some(Ok("Cancelled: the model's worker was stopped, and the model opens again from its files \
         (kept in this browser). Your text stays; Read when you are ready."
        .into())));
}
