//! An experiment: the whole run as one JSON object, the same for `lab train --config FILE`, the
//! page's worker and `window.spherewalk.train(config)`. Versioned; a bare `TrainConfig` (what the
//! CLI's checkpoints and the page's model files hold) reads as an experiment with default probe and
//! backend settings.

use serde::{Deserialize, Serialize};

use crate::config::{ModelConfig, TrainConfig};
use crate::error::{Error, Result};
use crate::science::probe::{Probe, ProbeConfig, MIN_FRAMES};
use crate::session::writing::Writing;

/// The experiment format this engine writes; older versions are read and upgraded.
pub const VERSION: u32 = 1;

/// Where training runs. One policy for the CLI and the page: `Auto` takes a hardware GPU and
/// keeps the CPU on a software adapter (lavapipe, SwiftShader), which is slower than the CPU path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    #[default]
    Auto,
    Gpu,
    Cpu,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Gpu => "gpu",
            BackendChoice::Cpu => "cpu",
        }
    }
}

/// When the probe row is recorded, in training steps: the same frames on every machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeSchedule {
    /// Record every this many steps; 0 picks about [`AUTO_FRAMES`] frames over the run.
    pub every: usize,
    /// Rows of validation batch 0 the probe follows.
    pub rows: usize,
    /// Most bytes the history keeps; when full it keeps every other frame and doubles `every`.
    pub budget_bytes: usize,
}

/// Frames an automatic schedule aims at over the whole run.
pub const AUTO_FRAMES: usize = 100;

impl Default for ProbeSchedule {
    fn default() -> Self {
        ProbeSchedule { every: 0, rows: 1, budget_bytes: 16 << 20 }
    }
}

impl ProbeSchedule {
    /// The probe's settings for a run of `steps` steps of `model`. A history budget too small for
    /// the probe's fewest frames of this model grows to hold them (and the memory check counts it),
    /// so a large model is a probe that keeps fewer frames, not a refused run.
    pub fn config(&self, steps: usize, model: &ModelConfig) -> ProbeConfig {
        let every = if self.every > 0 { self.every } else { steps.div_ceil(AUTO_FRAMES).max(1) };
        let fewest = Probe::frame_bytes(model, self.rows).saturating_mul(MIN_FRAMES);
        ProbeConfig { every, budget_bytes: self.budget_bytes.max(fewest) }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    #[serde(default = "current_version")]
    pub version: u32,
    pub train: TrainConfig,
    #[serde(default)]
    pub probe: ProbeSchedule,
    #[serde(default)]
    pub backend: BackendChoice,
    /// What the model writes while it trains (off unless asked for).
    #[serde(default)]
    pub writing: Writing,
}

fn current_version() -> u32 {
    VERSION
}

impl Experiment {
    pub fn new(train: TrainConfig) -> Self {
        Experiment {
            version: VERSION,
            train,
            probe: ProbeSchedule::default(),
            backend: BackendChoice::default(),
            writing: Writing::default(),
        }
    }

    /// Reads an experiment, or a bare `TrainConfig`, from JSON text; a clear error otherwise.
    pub fn from_json(text: &str) -> Result<Self> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("the experiment is not valid JSON: {e}")))?;
        Self::from_value(value)
    }

    pub fn from_value(mut value: serde_json::Value) -> Result<Self> {
        // A checkpoint's config.json (the page's "Download config" too): its run config.
        if value.get("engine_version").is_some() {
            if let Some(config) = value.get_mut("config") {
                value = config.take();
            }
        }
        let is_experiment = value.get("train").is_some();
        let exp = if is_experiment {
            serde_json::from_value::<Experiment>(value)
                .map_err(|e| Error::Config(format!("the experiment cannot be read: {e}")))?
        } else {
            let train = serde_json::from_value::<TrainConfig>(value).map_err(|e| {
                Error::Config(format!("neither an experiment ({{\"train\": ...}}) nor a training config: {e}"))
            })?;
            Experiment::new(train)
        };
        if exp.version == 0 || exp.version > VERSION {
            return Err(Error::Config(format!(
                "experiment version {} is not one this engine reads (1..={VERSION})",
                exp.version
            )));
        }
        Ok(exp)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("an experiment always serialises")
    }

    /// Checks the run, the probe schedule and the memory they need together against `budget`.
    pub fn validate(&self, budget: u64) -> Result<()> {
        if self.probe.rows == 0 {
            return Err(Error::Config("the probe needs at least one row, got 0".into()));
        }
        // A batch of 0 is the training config's to explain.
        if self.probe.rows > self.train.batch && self.train.batch > 0 {
            return Err(Error::Config(format!(
                "the probe follows {} rows of a validation batch of {}",
                self.probe.rows, self.train.batch
            )));
        }
        self.writing.validate()?;
        let probe = self.probe.config(self.train.steps, &self.train.model);
        self.train.validate_within(budget, probe.budget_bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_config_and_an_experiment_both_read() {
        let train = TrainConfig::browser_default();
        let bare = serde_json::to_string(&train).unwrap();
        let exp = Experiment::from_json(&bare).unwrap();
        assert_eq!(exp, Experiment::new(train.clone()));
        let round = Experiment::from_json(&exp.to_json()).unwrap();
        assert_eq!(round, exp);
        let partial = format!("{{\"train\": {bare}, \"probe\": {{\"every\": 3}}}}");
        let exp = Experiment::from_json(&partial).unwrap();
        assert_eq!((exp.probe.every, exp.probe.rows, exp.version), (3, 1, VERSION));
    }

    #[test]
    fn bad_experiments_say_why() {
        let msg = Experiment::from_json("{\"train\": 3}").unwrap_err().to_string();
        assert!(msg.contains("cannot be read"), "{msg}");
        assert!(Experiment::from_json("not json").unwrap_err().to_string().contains("not valid JSON"));
        let bare = serde_json::to_string(&TrainConfig::browser_default()).unwrap();
        let future = format!("{{\"version\": 9, \"train\": {bare}}}");
        assert!(Experiment::from_json(&future).unwrap_err().to_string().contains("version 9"));
        let typo = format!("{{\"train\": {bare}, \"probes\": {{}}}}");
        assert!(Experiment::from_json(&typo).unwrap_err().to_string().contains("probes"));
    }

    #[test]
    fn the_automatic_schedule_depends_on_steps_only() {
        let (s, m) = (ProbeSchedule::default(), ModelConfig::default());
        assert_eq!(s.config(400, &m).every, 4);
        assert_eq!(s.config(50, &m).every, 1);
        assert_eq!(ProbeSchedule { every: 7, ..s }.config(400, &m).every, 7);
    }
}
