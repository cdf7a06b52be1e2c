//! The experiment a visitor picks: presets and free settings, as one serde struct (it is what the
//! URL holds and what a saved run and a model file keep beside the weights).

use engine::config::{DataSpec, OptimizerConfig, Schedule};
use engine::science::joma;
use engine::{Activation, TrainConfig};
use serde::{Deserialize, Serialize};

/// Everything that defines a run. Missing fields take the default preset's values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub preset: String,
    /// A built-in data set name, "austen" (the page's copy of Pride and Prejudice, which the lab
    /// puts into `text` when a run starts: it is never in the link), or "text" for `text`.
    pub data: String,
    pub text: String,
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub context: usize,
    pub activation: String,
    pub causal: bool,
    pub optimizer: String,
    pub lr: f32,
    pub steps: usize,
    pub batch: usize,
    pub seed: u64,
    /// How fast the page trains, in steps per second (0: as fast as possible). It changes when the
    /// numbers arrive, never the numbers.
    pub steps_per_second: f64,
}

/// How long a preset's run lasts at its own pace: long enough for a class to watch it.
pub const CLASS_RUN_SECONDS: f64 = 25.0;

/// At a pace, the first tenth of a run goes at a third of it: that is where the tokens move and the
/// loss falls fastest (on the Brownian preset E[cos θ] falls from 1 to 0.4 by step 30, which took
/// 2.5 s at 12 steps/s; 7.5 s now).
pub const SLOW_START: f64 = 0.1;
const SLOW_FACTOR: f64 = 3.0;

/// The steps of a run of `total` shown slower at its start.
pub fn slow_steps(total: usize) -> usize {
    (total as f64 * SLOW_START).ceil() as usize
}

/// Milliseconds from step 0 to `step` of a run of `total` steps at `pace` steps per second.
pub fn paced_ms(step: usize, total: usize, pace: f64) -> f64 {
    paced_ms_at(step as f64, total, pace)
}

/// [`paced_ms`] at a fractional step (a replay between two steps).
pub fn paced_ms_at(step: f64, total: usize, pace: f64) -> f64 {
    (step + (SLOW_FACTOR - 1.0) * step.min(slow_steps(total) as f64)) * 1000.0 / pace
}

/// The (fractional) step reached `ms` after step 0 at `pace`: the inverse of [`paced_ms_at`], so a
/// replay goes as slowly as the run did where the action is.
pub fn paced_step(ms: f64, total: usize, pace: f64) -> f64 {
    let slow = slow_steps(total) as f64;
    let steps = ms * pace / 1000.0;
    if steps <= SLOW_FACTOR * slow {
        steps / SLOW_FACTOR
    } else {
        steps - (SLOW_FACTOR - 1.0) * slow
    }
}

/// The paces the page offers, in steps per second (0: as fast as possible).
pub const PACES: [f64; 8] = [2.0, 5.0, 8.0, 12.0, 16.0, 30.0, 60.0, 0.0];

/// A preset's pace: its steps in about [`CLASS_RUN_SECONDS`], rounded to one the page offers.
fn class_pace(steps: usize) -> f64 {
    let want = steps as f64 / CLASS_RUN_SECONDS;
    PACES
        .iter()
        .copied()
        .filter(|&p| p > 0.0)
        .min_by(|a, b| (a - want).abs().total_cmp(&(b - want).abs()))
        .unwrap_or(0.0)
}

/// The English preset's width, context, batch and steps.
const ENGLISH: (usize, usize, usize, usize) = (64, 64, 16, 3000);

/// A preset: its id (as in the URL), its title, and the story it tells.
pub struct Preset {
    pub id: &'static str,
    pub title: &'static str,
    pub story: &'static str,
}

pub const PRESETS: [Preset; 5] = [
    Preset {
        id: "sphere",
        title: "Tokens on the sphere",
        story: "A 2-layer transformer learns a small grammar. Each LayerNorm puts every token on a sphere; \
                do tokens of the same kind (one colour each: vowels, consonants, spaces) gather as training goes \
                on? The line under the view measures it.",
    },
    Preset {
        id: "english",
        title: "Learn to write English",
        story: "A 2-layer transformer reads Jane Austen's Pride and Prejudice one character at a time and learns \
                to predict the next one. Watch \"The model writes\": random letters turn into words, then into \
                phrases, as the validation loss falls below the letter-frequency baseline.",
    },
    Preset {
        id: "race",
        title: "Adam against CG-FAC",
        story: "The same model trained at the same time by CG-FAC, a second-order method that solves for a \
                curvature-aware step with conjugate gradients, and by Adam, each in its own worker, from the same \
                initial weights on the same data. The loss chart shows both against steps, the race chart against \
                seconds: fewer steps is not always less time.",
    },
    Preset {
        id: "joma",
        title: "JoMA: sparse, then dense",
        story: "Data from a hidden hierarchy of chunks, through a nonlinear MLP (GELU). JoMA predicts that \
                attention first gets sparse (entropy falls), then denser again, because of the nonlinearity. \
                Measured on this preset with seeds 0, 1 and 2: layer 1 dips and rebounds on all three (by 0.37 to \
                0.76 nats). Switch the activation to identity to compare: JoMA predicts attention then stays \
                sparse, yet here layer 1 rebounds on two of the three seeds too, by less (0.06 to 0.16 nats).",
    },
    Preset {
        id: "brownian",
        title: "Brownian or not?",
        story: "Do the tokens wander on the sphere like Brownian motion as the model trains? The panel below the \
                sphere fits a diffusion coefficient D to their mean cosine over training and runs Brownian ghost \
                walkers from the same start points with that D: drift and clustering show up as a poor fit and \
                a large KS distance. Turn on the ghosts in the sphere view to see both.",
    },
];

impl Default for Settings {
    fn default() -> Self {
        Settings::preset("sphere").expect("the default preset exists")
    }
}

impl Settings {
    /// The settings of a named preset; None for an unknown name.
    pub fn preset(id: &str) -> Option<Settings> {
        let d = TrainConfig::browser_default();
        let base = Settings {
            preset: "sphere".into(),
            data: d.data.name().into(),
            text: String::new(),
            d_model: d.model.d_model,
            layers: d.model.layers,
            heads: d.model.heads,
            context: d.model.context,
            activation: "gelu".into(),
            causal: d.model.causal,
            optimizer: d.optimizer.name().into(),
            lr: d.lr,
            steps: d.steps,
            batch: d.batch,
            seed: d.seed,
            steps_per_second: class_pace(d.steps),
        };
        match id {
            "sphere" => Some(base),
            "race" => Some(Settings {
                preset: id.into(),
                optimizer: "cgfac".into(),
                lr: OptimizerConfig::named("cgfac").map(|o| o.default_lr()).unwrap_or(0.03),
                steps: 200,
                steps_per_second: class_pace(200),
                ..base
            }),
            "joma" => Some(Settings {
                preset: id.into(),
                data: "hierarchy".into(),
                activation: "gelu".into(),
                lr: joma::PRESET_LR,
                steps: joma::PRESET_STEPS,
                steps_per_second: class_pace(joma::PRESET_STEPS),
                ..base
            }),
            "brownian" => Some(Settings { preset: id.into(), steps: 300, steps_per_second: class_pace(300), ..base }),
            // Sized so that the browser's CPU path writes words within about a minute (README).
            "english" => Some(Settings {
                preset: id.into(),
                data: "austen".into(),
                d_model: ENGLISH.0,
                layers: 2,
                heads: 4,
                context: ENGLISH.1,
                batch: ENGLISH.2,
                steps: ENGLISH.3,
                lr: 3e-3,
                steps_per_second: 0.0,
                ..base
            }),
            _ => None,
        }
    }

    /// Settings describing an engine config (a model uploaded without the page's settings).
    pub fn from_config(c: &TrainConfig) -> Settings {
        let (data, text) = match &c.data {
            DataSpec::Text { text } => ("text".to_string(), text.clone()),
            other => (other.name().to_string(), String::new()),
        };
        Settings {
            preset: "custom".into(),
            data,
            text,
            d_model: c.model.d_model,
            layers: c.model.layers,
            heads: c.model.heads,
            context: c.model.context,
            activation: serde_json::to_value(c.model.activation)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "gelu".into()),
            causal: c.model.causal,
            optimizer: c.optimizer.name().into(),
            lr: c.lr,
            steps: c.steps,
            batch: c.batch,
            seed: c.seed,
            steps_per_second: 0.0,
        }
    }

    /// Whether `other` describes the same run (the pace aside: it changes no number).
    pub fn same_run(&self, other: &Settings) -> bool {
        *self == Settings { steps_per_second: self.steps_per_second, ..other.clone() }
    }

    /// The worker's pace: None for as fast as possible.
    pub fn pace(&self) -> Option<f64> {
        (self.steps_per_second.is_finite() && self.steps_per_second > 0.0).then_some(self.steps_per_second)
    }

    /// The engine's training configuration, or the engine's message for what is wrong.
    pub fn to_config(&self) -> Result<TrainConfig, String> {
        let mut c = TrainConfig::browser_default();
        c.model.d_model = self.d_model;
        c.model.heads = self.heads;
        c.model.layers = self.layers;
        c.model.context = self.context;
        c.model.d_ff = 4 * self.d_model;
        c.model.activation = self.activation.parse::<Activation>().map_err(|e| e.to_string())?;
        c.model.causal = self.causal;
        c.model.seed = self.seed;
        c.seed = self.seed;
        c.data = if self.data == "text" || self.data == "austen" {
            DataSpec::Text { text: self.text.clone() }
        } else {
            DataSpec::named(&self.data).map_err(|e| e.to_string())?
        };
        c.optimizer = OptimizerConfig::named(&self.optimizer).map_err(|e| e.to_string())?;
        c.lr = self.lr;
        c.steps = self.steps;
        c.batch = self.batch;
        c.eval_every = (self.steps / 20).max(1);
        c.schedule = Schedule::WarmupCosine { warmup: (self.steps / 10).clamp(1, 20), min_ratio: 0.1 };
        if self.steps == 0 {
            return Err("invalid configuration: steps must be positive, got 0".into());
        }
        if self.steps > MAX_STEPS {
            return Err(format!(
                "invalid configuration: steps = {} is over the page's limit of {MAX_STEPS}",
                self.steps
            ));
        }
        if self.d_model < 3 {
            return Err(format!("invalid configuration: the sphere view needs d_model >= 3, got {}", self.d_model));
        }
        // The vocabulary comes from the data when the run starts; check the rest now.
        let mut check = c.clone();
        check.model.vocab = 1;
        check.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// Number of characters in the longest text the URL keeps.
pub const URL_TEXT_LIMIT: usize = 2000;

/// Most steps a run from the page may have: a day at the default pace is far below it.
pub const MAX_STEPS: usize = 1_000_000;

/// A form field's text as a count in `1..=max`: digits only, with a message that says what to type.
pub fn parse_count(label: &str, text: &str, max: usize) -> Result<usize, String> {
    let t = text.trim();
    match t.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        Ok(0) => Err(format!("{label} must be at least 1")),
        Ok(_) => Err(format!("{label} can be at most {max}")),
        Err(_) => Err(format!("{label} must be a whole number such as 32 (got \"{t}\")")),
    }
}

/// A seed: any whole number from 0 up.
pub fn parse_seed(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse::<u64>().map_err(|_| format!("the seed must be a whole number from 0 up (got \"{t}\")"))
}

/// A learning rate: a positive, finite number in plain or scientific notation ("0.001", "1e-3").
/// A decimal comma is refused rather than read as something else.
pub fn parse_lr(text: &str) -> Result<f32, String> {
    let t = text.trim();
    if t.contains(',') {
        return Err(format!("write the learning rate with a decimal point, not a comma: \"{}\"", t.replace(',', ".")));
    }
    match t.parse::<f32>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) if !v.is_finite() => Err(format!("the learning rate must be a finite number (got \"{t}\")")),
        Ok(_) => Err(format!("the learning rate must be positive (got \"{t}\")")),
        Err(_) => Err(format!("the learning rate must be a number such as 0.001 or 1e-3 (got \"{t}\")")),
    }
}
