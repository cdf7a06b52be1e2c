//! A reading's layer table as CSV, one row per layer and head (the final norm, which has no
//! heads, one row with the head left empty): what the page's "Download reading" and
//! `lab inspect --csv` give to a spreadsheet.

use super::Inspection;

pub const HEADER: &str =
    "layer,head,residual_norm,radius_max_rel_err,gain_mean_rel_offset,entropy_nats,kernel_tv_mean,kernel_tv_max";

pub fn csv(r: &Inspection) -> String {
    let mut out = format!("{HEADER}\n");
    for l in &r.layers {
        let layer = format!("{},", l.layer);
        let common = format!("{},{},{}", l.residual_norm, l.radius.max_rel_err, l.gain.mean_rel_offset);
        if l.heads.is_empty() {
            out += &format!("{layer},{common},,,\n");
        }
        for h in &l.heads {
            out += &format!("{layer}{},{common},{},{},{}\n", h.head, h.entropy, h.kernel_tv_mean, h.kernel_tv_max);
        }
    }
    out
}
