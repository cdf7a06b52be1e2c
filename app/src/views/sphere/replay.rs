//! The sphere's moment in training: the cloud at a (fractional) step, between two recorded frames
//! along the great circles joining them (`science::sphere::slerp`), with the frames before it as
//! trails; and Play's clock, which replays at the pace control's speed, slow start included. A
//! real model's reading plays through depth the same way: layer after layer, the tokens gliding
//! from one depth to the next.

use common::settings;
use engine::science::sphere::slerp;
use engine::session::Panels;

use crate::lab::TRAIL_LEN;

/// Without a pace ("as fast as possible") the whole recorded history plays in this many seconds;
/// with one, Play replays at the pace, slow start included.
const PLAY_SECONDS: f64 = 12.0;
/// The cloud at one moment of training: the positions (between two recorded frames: along the
/// great circles joining them) and the frames before it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub step: f64,
    pub now: Vec<[f64; 3]>,
    /// Oldest first, ending with the last recorded frame before `now`.
    pub trail: Vec<Vec<[f64; 3]>>,
}

/// The moment `at` (a training step, fractional while playing; the latest when None) at `depth`.
pub fn shown(snap: &Panels, at: Option<f64>, depth: usize) -> Option<Shown> {
    let last = snap.frames().checked_sub(1)?;
    let depth = depth.min(snap.layers);
    let step = at.unwrap_or(snap.steps[last] as f64).clamp(snap.steps[0] as f64, snap.steps[last] as f64);
    let k = snap.steps.iter().rposition(|&s| s as f64 <= step).unwrap_or(0);
    let first = (k + 1).saturating_sub(TRAIL_LEN);
    let mut trail: Vec<_> = (first..=k).map(|f| snap.points(depth, f)).collect();
    let now = match k < last && step > snap.steps[k] as f64 {
        true => {
            let frac = (step - snap.steps[k] as f64) / (snap.steps[k + 1] - snap.steps[k]) as f64;
            let next = snap.points(depth, k + 1);
            trail[trail.len() - 1].iter().zip(&next).map(|(&a, &b)| slerp(a, b, frac)).collect()
        }
        false => trail.pop()?,
    };
    Some(Shown { step, now, trail })
}

/// A real model's walk through every depth plays in about this many seconds (at least a second a
/// layer, so a deep model takes longer).
const DEPTH_SECONDS: f64 = 8.0;

/// The cloud at the (fractional) depth `at` of the last recorded frame: between two depths along
/// the great circles joining them, the depths before it as trails.
pub fn through_depth(snap: &Panels, at: f64) -> Option<Shown> {
    let frame = snap.frames().checked_sub(1)?;
    let at = at.clamp(0.0, snap.layers as f64);
    let k = at.floor() as usize;
    let first = (k + 1).saturating_sub(TRAIL_LEN);
    let mut trail: Vec<_> = (first..=k).map(|d| snap.points(d, frame)).collect();
    let now = match k < snap.layers && at > k as f64 {
        true => {
            let next = snap.points(k + 1, frame);
            trail[trail.len() - 1].iter().zip(&next).map(|(&a, &b)| slerp(a, b, at - k as f64)).collect()
        }
        false => trail.pop()?,
    };
    Some(Shown { step: snap.steps[frame] as f64, now, trail })
}

/// The depth `dt` seconds after `at`, over `layers` layers.
pub fn next_depth(at: f64, dt: f64, layers: usize) -> f64 {
    at + dt * (layers as f64 / DEPTH_SECONDS).min(1.0)
}

/// Play's next step after `dt` seconds at `now`, over the recorded `span` of a run of `total`
/// steps: at the pace (its slow start too) when there is one, else the span in [`PLAY_SECONDS`].
pub fn next(now: f64, dt: f64, (first, last): (usize, usize), total: usize, pace: Option<f64>) -> f64 {
    match pace {
        Some(p) => settings::paced_step(settings::paced_ms_at(now, total, p) + 1000.0 * dt, total, p),
        None => now + (last - first) as f64 / PLAY_SECONDS * dt,
    }
}
