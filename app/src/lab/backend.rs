//! Where training runs: the visitor's choice (auto, WebGPU, CPU), the line that says what runs the
//! step, and the warning before a slow or absent WebGPU.

use super::*;

/// The page's words for the engine's backend choice (one type, the engine's; the form's option for
/// `Gpu` is "webgpu", the API the page reaches it through).
pub trait InWords {
    fn id(self) -> &'static str;
    fn label(self) -> &'static str;
    /// The backend line before a run has picked its backend.
    fn idle_line(self) -> String;
}

/// The choices in the order the form lists them.
pub const CHOICES: [BackendChoice; 3] = [BackendChoice::Auto, BackendChoice::Gpu, BackendChoice::Cpu];

/// The choice of a form option's id.
pub fn choice_of(id: &str) -> Option<BackendChoice> {
    CHOICES.into_iter().find(|b| b.id() == id)
}

impl InWords for BackendChoice {
    fn id(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Gpu => "webgpu",
            BackendChoice::Cpu => "cpu",
        }
    }

    fn label(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto (WebGPU on a hardware GPU, else CPU)",
            BackendChoice::Gpu => "WebGPU",
            BackendChoice::Cpu => "CPU",
        }
    }

    fn idle_line(self) -> String {
        match self {
            BackendChoice::Auto => {
                "Backend: auto (WebGPU on a hardware GPU, else CPU; chosen when the run starts)".into()
            }
            BackendChoice::Gpu => "Backend: WebGPU (the adapter is requested when the run starts)".into(),
            BackendChoice::Cpu => "Backend: CPU".into(),
        }
    }
}

/// The session's backend line ("gpu (adapter)", "cpu (why)") as the page says it, in words a
/// teacher can read aloud, and the graphics stack's own words when they are not (for "details").
pub(super) fn backend_line(line: &str) -> (String, Option<String>) {
    let (main, extra) = line.split_once(" · ").map_or((line, None), |(m, e)| (m, Some(e)));
    let (head, rest) = main.split_at(main.find(' ').unwrap_or(main.len()));
    let head = match head {
        "gpu" => "WebGPU",
        "cpu" => "CPU",
        other => other,
    };
    // "no GPU adapter: No suitable graphics adapter found; noop support not compiled in, ...".
    let (rest, detail) = match rest.find("no GPU adapter") {
        Some(_) => {
            let auto = if rest.contains("auto:") { "auto: " } else { "" };
            (format!(" ({auto}this browser offers no GPU to the page)"), Some(rest.trim().to_string()))
        }
        None => (rest.to_string(), None),
    };
    let extra = extra.map(|e| format!(" · {e}")).unwrap_or_default();
    (format!("Backend: {head}{rest}{extra}"), detail)
}

/// Where a real model's reading ran (`Read::on`: "CPU", "WebGPU (adapter)", or "CPU (WebGPU:
/// why)"), in one plain line, and the graphics stack's own words for "details".
pub fn reading_place(on: &str) -> (String, Option<String>) {
    let Some(why) = on.strip_prefix("CPU (WebGPU: ").and_then(|w| w.strip_suffix(')')) else {
        let on = if on == "CPU" { "the CPU" } else { on };
        return (format!("This reading ran on {on}."), None);
    };
    let said = match why.find("only a software one") {
        Some(i) => format!("this browser's only GPU is {}", &why[i + "only ".len()..]),
        None if why.contains("no GPU adapter") => "this browser offers no GPU to the page".into(),
        None => "WebGPU could not run it".into(),
    };
    (format!("This reading ran on the CPU: {said}."), Some(why.to_string()))
}

impl Lab {
    /// The user picked a backend: a run in progress moves there, from its exact state.
    pub fn set_backend(self, choice: BackendChoice) {
        if self.backend.choice.get_untracked() == choice {
            return;
        }
        self.backend.choice.set(choice);
        if self.run_config.with_untracked(Option::is_none) {
            self.backend.line.set(choice.idle_line());
            self.backend.detail.set(None);
        }
        self.send(Command::SetBackend { choice });
        super::model_worker::set_backend(self);
    }

    /// Before a run: what choosing WebGPU means on this browser's adapter, when it is slow or absent.
    pub fn backend_warning(self) -> Option<String> {
        if self.backend.choice.get() != BackendChoice::Gpu {
            return None;
        }
        match self.backend.adapter.get()? {
            Ok((name, true)) => Some(format!(
                "WebGPU here runs on {name}, a software adapter: a step takes seconds, far slower than the CPU \
                 path. For a class, pick auto or CPU."
            )),
            Ok((_, false)) => None,
            Err(why) => Some(format!("This browser offers no WebGPU adapter ({why}): the run will use the CPU.")),
        }
    }

    /// What the export records: "webgpu (adapter)" or "cpu".
    pub fn backend_in_use(self) -> String {
        match self.backend.on_gpu.get_untracked() {
            Some(adapter) => format!("webgpu ({adapter})"),
            None => "cpu".into(),
        }
    }
}

/// The line under a panel drawn from a probe read back from the GPU.
pub fn gpu_copy_note(lab: Lab) -> impl IntoView {
    view! {
        <Show when=move || lab.backend.on_gpu.with(Option::is_some)>
            <p class="note gpu-copy-note">
                "Drawn from the weights read back from WebGPU at each probe step."
            </p>
        </Show>
    }
}
