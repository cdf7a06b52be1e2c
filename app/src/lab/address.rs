//! The page and its address kept together: a link opens its experiment and tour step (`url_state`
//! reads it), the address follows the settings the visitor changes so a copied link reproduces
//! the experiment, and a hash typed into the address bar of the open page applies at once.

use leptos::prelude::*;

use super::{url_state, Lab};
use crate::views::tour;

/// What the address holds beside the settings, as the page shows it.
#[derive(Clone, Copy)]
pub struct Address {
    /// The tour step on screen (0-based), written into the address as `&tour=N`.
    pub tour_step: RwSignal<Option<usize>>,
    /// Why the link could not be used as it is.
    pub error: RwSignal<Option<String>>,
    /// The text is too long for the link: a copied link keeps the settings only.
    pub too_long: RwSignal<bool>,
}

/// Reads the link, opens the lab on its experiment (a tour step's, unless the link gives one of
/// its own), and keeps the two in step.
pub fn open() -> (Lab, Address) {
    let mut link = url_state::read();
    let tour_step = RwSignal::new(None::<usize>);
    match link.tour.clone() {
        Some(Ok(n)) if (1..=tour::STEPS.len()).contains(&n) => {
            tour_step.set(Some(n - 1));
            if !url_state::has_experiment(&url_state::hash()) {
                link.settings = common::settings::Settings::preset(tour::STEPS[n - 1].preset).unwrap_or_default();
            }
        }
        Some(n) => {
            let n = n.map_or_else(|text| format!("{text:?}"), |n| n.to_string());
            link.problem = Some(format!("the link opens tour step {n}; the tour has steps 1 to {}", tour::STEPS.len()))
        }
        None => {}
    }
    if let Some(p) = &link.problem {
        web_sys::console::warn_1(&format!("Spherewalk: {p}").into());
    }
    let (hide, embed) = (StoredValue::new(link.hide.clone()), StoredValue::new(link.embed.clone()));
    if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
        let _ = root.set_attribute("data-hide", &link.hide.join(" "));
        if let Some(panel) = &link.embed {
            let _ = root.set_attribute("data-embed", panel);
        }
    }
    let lab = Lab::new(link.settings);
    lab.link_errors.set(link.bad);
    let address = Address { tour_step, error: RwSignal::new(link.problem), too_long: RwSignal::new(false) };
    // What the address keeps beside the experiment: the tour step and the hidden parts.
    let extra = move || {
        let mut e = tour_step.get_untracked().map(|n| format!("&tour={}", n + 1)).unwrap_or_default();
        hide.with_value(|h| {
            if !h.is_empty() {
                e.push_str(&format!("&hide={}", h.join(",")));
            }
        });
        embed.with_value(|p| {
            if let Some(p) = p {
                e.push_str(&format!("&embed={p}"));
            }
        });
        e
    };
    // Settings that came from the address itself leave it as it is.
    let from_link = StoredValue::new(true);
    Effect::new(move |_| {
        let settings = lab.settings.get();
        if from_link.get_value() {
            from_link.set_value(false);
            return;
        }
        address.too_long.set(url_state::write(&settings, &extra()));
    });
    // Moving through the tour writes its step into the address (a teacher links to it).
    Effect::new(move |prev: Option<Option<usize>>| {
        let now = tour_step.get();
        if prev.is_some_and(|p| p != now) {
            match now {
                Some(_) => url_state::replace(&format!("#{}", extra().trim_start_matches('&'))),
                None => {
                    url_state::write(&lab.settings.get_untracked(), &extra());
                }
            }
        }
        if let Some(n) = now {
            // After the page is drawn: the step's panel in view.
            let panel = tour::STEPS[n].panel;
            request_animation_frame(move || tour::focus(panel));
        }
        now
    });
    let hash = window_event_listener(leptos::ev::hashchange, move |_| {
        let link = url_state::read();
        address.error.set(link.problem);
        from_link.set_value(true);
        lab.replace_settings(link.settings);
        lab.link_errors.set(link.bad);
    });
    on_cleanup(move || hash.remove());
    (lab, address)
}
