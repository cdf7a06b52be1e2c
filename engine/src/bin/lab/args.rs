//! Flags shared by `train` and `race`: the data, the model and the optimizer's settings.

use std::path::PathBuf;

use clap::Args;
use engine::config::{DataSpec, Fisher, OptimizerConfig, TrainConfig};
use engine::optim::kronecker::Product;
use engine::Error;

/// The built-in English text, Pride and Prejudice (`cargo xtask setup` unpacks it from Debian's
/// r-cran-janeaustenr; the page serves the same file).
pub const AUSTEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../public/data/austen.txt");

#[derive(Args, Clone)]
pub struct RunArgs {
    /// A built-in data set (grammar, hierarchy, copy, reverse, sort, modadd), austen (Pride and
    /// Prejudice, real English) or a path to a .txt file.
    #[arg(long, default_value = "grammar")]
    pub data: String,
    /// Optimizer steps (default 600).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Model width (default 64; d_ff follows as 4x unless given).
    #[arg(long)]
    pub d_model: Option<usize>,
    /// Transformer blocks (default 2).
    #[arg(long)]
    pub layers: Option<usize>,
    /// Attention heads; must divide d_model (default 4).
    #[arg(long)]
    pub heads: Option<usize>,
    /// MLP hidden width (default 256).
    #[arg(long)]
    pub d_ff: Option<usize>,
    /// Positions per sequence (default 64).
    #[arg(long)]
    pub context: Option<usize>,
    /// Sequences per batch (default 16).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Learning rate (default: the optimizer's swept default).
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f32>,
    /// gelu, relu or identity.
    #[arg(long)]
    pub activation: Option<String>,
    /// Bidirectional attention instead of causal.
    #[arg(long)]
    pub bidirectional: bool,
    /// Steps between validation evaluations (default 50).
    #[arg(long)]
    pub eval_every: Option<usize>,
    #[command(flatten)]
    pub second_order: SecondOrderArgs,
}

/// K-FAC and CG-FAC settings (ignored by SGD and Adam).
#[derive(Args, Clone)]
pub struct SecondOrderArgs {
    /// Damping lambda (> 0).
    #[arg(long, allow_negative_numbers = true)]
    pub damping: Option<f32>,
    /// K-FAC: split the damping evenly (sqrt(lambda) on A and on G) instead of by the factors'
    /// scales (the pi correction, the default).
    #[arg(long)]
    pub no_pi_damping: bool,
    /// K-FAC and CG-FAC: the curvature of the batch's own labels (empirical, the default) or of
    /// labels drawn from the model (sampled: the Fisher itself).
    #[arg(long)]
    pub fisher: Option<Fisher>,
    /// CG-FAC: maximum CG iterations per layer and step.
    #[arg(long)]
    pub cg_iters: Option<usize>,
    /// CG-FAC: stop when |r|^2/|r0|^2 falls below this, in (0, 1).
    #[arg(long, allow_negative_numbers = true)]
    pub cg_tol: Option<f32>,
    /// CG-FAC: start CG from the previous step's solution.
    #[arg(long)]
    pub warm_start: bool,
    /// CG-FAC curvature product: factors, matrix-free or exact-fisher.
    #[arg(long)]
    pub product: Option<Product>,
    /// Running-average decay of the factors A and G, in [0, 1).
    #[arg(long, allow_negative_numbers = true)]
    pub factor_decay: Option<f32>,
    /// Steps between factor updates.
    #[arg(long)]
    pub update_interval: Option<usize>,
    /// K-FAC: steps between inverse refreshes.
    #[arg(long)]
    pub inverse_interval: Option<usize>,
    /// KL-clip kappa (0 = off).
    #[arg(long, allow_negative_numbers = true)]
    pub kl_clip: Option<f32>,
    /// Momentum of the preconditioned step.
    #[arg(long, allow_negative_numbers = true)]
    pub momentum: Option<f32>,
}

/// Most bytes of a text or a config file `lab` reads: far more than any run needs, and a
/// device such as /dev/zero is refused instead of read until memory runs out.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The whole file at `path` (`what` names it in the errors), refused past [`MAX_FILE_BYTES`].
pub fn read_limited(path: &std::path::Path, what: &str) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| Error::Data(format!("{what} {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Data(format!("{what} {}: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Data(format!(
            "{what} {} is over the limit of {} MiB",
            path.display(),
            MAX_FILE_BYTES >> 20
        )));
    }
    Ok(bytes)
}

pub fn data_spec(arg: &str) -> Result<DataSpec, Error> {
    if DataSpec::BUILT_IN.contains(&arg) {
        return DataSpec::named(arg);
    }
    if arg == "austen" {
        let text = std::fs::read_to_string(AUSTEN).map_err(|e| {
            Error::Data(format!("the English text {AUSTEN} cannot be read ({e}); `cargo xtask setup` writes it"))
        })?;
        return Ok(DataSpec::Text { text });
    }
    let path = PathBuf::from(arg);
    if !path.exists() {
        if arg.contains(std::path::MAIN_SEPARATOR) || arg.contains('.') {
            return Err(Error::Data(format!("there is no file {arg}")));
        }
        return DataSpec::named(arg); // the "unknown data set" message lists the built-in names
    }
    let bytes = read_limited(&path, "the data")?;
    let text = String::from_utf8(bytes).map_err(|_| Error::Data(format!("{} is not UTF-8 text", path.display())))?;
    Ok(DataSpec::Text { text })
}

impl RunArgs {
    /// The run these flags describe, for `optimizer` and `seed`.
    pub fn config(&self, optimizer: &str, seed: u64) -> Result<TrainConfig, Error> {
        let mut cfg = TrainConfig {
            data: data_spec(&self.data)?,
            optimizer: OptimizerConfig::named(optimizer)?,
            ..TrainConfig::default()
        };
        cfg.lr = self.lr.unwrap_or_else(|| cfg.optimizer.default_lr());
        cfg.seed = seed;
        cfg.model.seed = seed;
        let m = &mut cfg.model;
        if let Some(v) = self.d_model {
            m.d_model = v;
            m.d_ff = 4 * v;
        }
        m.layers = self.layers.unwrap_or(m.layers);
        m.heads = self.heads.unwrap_or(m.heads);
        m.d_ff = self.d_ff.unwrap_or(m.d_ff);
        m.context = self.context.unwrap_or(m.context);
        m.causal = !self.bidirectional;
        if let Some(act) = &self.activation {
            m.activation = act.parse()?;
        }
        cfg.batch = self.batch.unwrap_or(cfg.batch);
        cfg.steps = self.steps.unwrap_or(cfg.steps);
        cfg.eval_every = self.eval_every.unwrap_or(cfg.eval_every);
        if let Some(so) = cfg.optimizer.second_order_mut() {
            let a = &self.second_order;
            so.damping = a.damping.unwrap_or(so.damping);
            so.max_iters = a.cg_iters.unwrap_or(so.max_iters);
            so.tol = a.cg_tol.unwrap_or(so.tol);
            so.warm_start |= a.warm_start;
            so.pi_damping &= !a.no_pi_damping;
            so.fisher = a.fisher.unwrap_or(so.fisher);
            so.product = a.product.unwrap_or(so.product);
            so.decay = a.factor_decay.unwrap_or(so.decay);
            so.update_interval = a.update_interval.unwrap_or(so.update_interval);
            so.inverse_interval = a.inverse_interval.unwrap_or(so.inverse_interval);
            so.kl_clip = a.kl_clip.unwrap_or(so.kl_clip);
            so.momentum = a.momentum.unwrap_or(so.momentum);
        }
        Ok(cfg)
    }
}
