//! Pointers on the ball. A mouse or pen turns it; on a touch screen one finger scrolls the page
//! (touch-action: pan-y) and two fingers turn the ball, or one with the "one-finger turn" toggle.
//! A press that does not move selects the token under it; a mouse over a dot names its token
//! (`hovered`: its label is drawn even where labels crowd).

use leptos::html::Canvas;
use leptos::prelude::*;

use super::draw::Drawn;
use crate::lab::Lab;

/// The pointers down on the ball (id, touch, last x, last y) and how far they moved.
#[derive(Clone, Copy)]
pub struct Grab {
    lab: Lab,
    canvas: NodeRef<Canvas>,
    drawn: RwSignal<Drawn>,
    one_finger: RwSignal<bool>,
    hovered: RwSignal<Option<usize>>,
    pointers: StoredValue<Vec<(i32, bool, f64, f64)>>,
    moved: StoredValue<f64>,
}

impl Grab {
    pub fn new(
        lab: Lab,
        canvas: NodeRef<Canvas>,
        drawn: RwSignal<Drawn>,
        one_finger: RwSignal<bool>,
        hovered: RwSignal<Option<usize>>,
    ) -> Self {
        Grab {
            lab,
            canvas,
            drawn,
            one_finger,
            hovered,
            pointers: StoredValue::new(Vec::new()),
            moved: StoredValue::new(0.0),
        }
    }

    pub fn down(self, ev: &leptos::ev::PointerEvent) {
        let touch = ev.pointer_type() == "touch";
        self.pointers.update_value(|p| p.push((ev.pointer_id(), touch, ev.client_x() as f64, ev.client_y() as f64)));
        self.moved.set_value(0.0);
        if let Some(c) = self.canvas.get_untracked() {
            let _ = c.set_pointer_capture(ev.pointer_id());
        }
    }

    pub fn moved(self, ev: &leptos::ev::PointerEvent) {
        let (x, y) = (ev.client_x() as f64, ev.client_y() as f64);
        let one_finger = self.one_finger.get_untracked();
        let turn = self.pointers.try_update_value(|p| {
            let touches = p.iter().filter(|q| q.1).count();
            let q = p.iter_mut().find(|q| q.0 == ev.pointer_id())?;
            let delta = (x - q.2, y - q.3);
            (q.2, q.3) = (x, y);
            match (q.1, touches) {
                (false, _) => Some(delta),
                (true, n) if n >= 2 || one_finger => Some((delta.0 / n as f64, delta.1 / n as f64)),
                _ => None,
            }
        });
        if turn == Some(None) && ev.pointer_type() != "touch" {
            let over = self.nearest(ev);
            if self.hovered.get_untracked() != over {
                self.hovered.set(over);
            }
        }
        if let Some(Some((dx, dy))) = turn {
            self.moved.update_value(|m| *m += dx.abs() + dy.abs());
            self.lab.view.yaw.update(|v| *v += dx * 0.01);
            self.lab.view.pitch.update(|v| *v = (*v + dy * 0.01).clamp(-1.5, 1.5));
        }
    }

    pub fn up(self, ev: &leptos::ev::PointerEvent) {
        let was_down = self.pointers.try_update_value(|p| {
            let had = p.iter().any(|q| q.0 == ev.pointer_id());
            p.retain(|q| q.0 != ev.pointer_id());
            had && p.is_empty()
        });
        if was_down == Some(true) && self.moved.get_value() < 4.0 {
            let nearest = self.nearest(ev);
            if nearest.is_some() {
                self.lab.view.selected.set(nearest);
            }
        }
    }

    /// The token whose dot is under the pointer (within 12 px; the one in front, as the eye sees it).
    fn nearest(self, ev: &leptos::ev::PointerEvent) -> Option<usize> {
        let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
        self.drawn.with_untracked(|d| {
            d.screen
                .iter()
                .enumerate()
                .filter(|(_, (px, py, _))| (px - x).hypot(py - y) < 12.0)
                .max_by(|a, b| a.1 .2.total_cmp(&b.1 .2))
                .map(|(i, _)| i)
        })
    }

    pub fn leave(self) {
        self.hovered.set(None);
    }

    pub fn cancel(self, ev: &leptos::ev::PointerEvent) {
        self.pointers.update_value(|p| p.retain(|q| q.0 != ev.pointer_id()));
    }
}
