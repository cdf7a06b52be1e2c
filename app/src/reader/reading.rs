//! What the model worker does with a model: open it from its files (the one open before stays
//! open until the new one has opened, when memory allows both: a bad file then loses nothing),
//! read a text on the GPU or the CPU, and write after a prompt.

use engine::gpu::reader::GpuReader;
use engine::gpu::{GpuContext, GpuError};
use engine::lenses::{self, history, Read};
use engine::memory::{self, MODEL_BUDGET};
use engine::pretrained::{torch_bin, ModelFiles, Pretrained, TokenizerFiles};
use engine::sample::{self, SampleSpec};
use engine::session::BackendChoice;
use wasm_bindgen::JsValue;

use super::Reader;
use crate::js::{now_ms, yield_now};
use crate::protocol::{self, Event, OpenedModel};

fn summary(p: &Pretrained) -> OpenedModel {
    let cfg = &p.model.cfg;
    OpenedModel {
        name: p.name.clone(),
        family: p.family.name().to_string(),
        block: match cfg.causal {
            true => cfg.arch.describe(cfg.heads),
            false => format!("{}, attention both ways", cfg.arch.describe(cfg.heads)),
        },
        layers: cfg.layers,
        heads: cfg.heads,
        d_model: cfg.d_model,
        vocab: cfg.vocab,
        context: cfg.context,
        params: p.model.params.len(),
        fills: match cfg.arch.head_transform {
            true => Some(p.tokenizer.mask().map_or("its mask token".into(), |m| p.tokenizer.decode(&[m]))),
            false => None,
        },
    }
}

/// The model's files from the command's bulk arrays, named by `names` (in their order).
fn files<'a>(names: &[String], bytes: &'a [Vec<u8>]) -> Result<ModelFiles<'a>, String> {
    let find = |name: &str| names.iter().position(|n| n == name).map(|i| bytes[i].as_slice());
    let (Some(config), Some(weights)) = (find("config.json"), find("model.safetensors")) else {
        return Err(format!("a model opens from config.json and model.safetensors; given: {}", names.join(", ")));
    };
    let tokenizer = match (find("tokenizer.json"), find("vocab.json"), find("merges.txt")) {
        (Some(json), ..) => Some(TokenizerFiles::Json(json)),
        (None, Some(vocab), Some(merges)) => Some(TokenizerFiles::VocabMerges { vocab, merges }),
        _ => None,
    };
    Ok(ModelFiles { config, weights, tokenizer })
}

impl Reader {
    /// Opens the model named `name` from its files (`names[i]` is bulk array i); the answer
    /// carries the page's opening number `id`.
    pub(super) fn open_model(&mut self, name: String, names: &[String], bulk: &[JsValue], id: u64) {
        let bytes: Vec<Vec<u8>> = (0..names.len()).map(|i| protocol::bytes_of(bulk.get(i))).collect();
        let files = match files(names, &bytes) {
            Ok(f) => f,
            Err(error) => {
                return self.post(Event::Opened { id, open: self.pretrained.as_ref().map(summary), error: Some(error) })
            }
        };
        // A model refused from its config (or too large for the tab) never closes the one open now.
        let file = torch_bin::held_while_read(files.weights.len() as u64, torch_bin::is_zip(files.weights));
        if let Err(e) = Pretrained::check(files.config, file, MODEL_BUDGET) {
            let open = self.pretrained.as_ref().map(summary);
            return self.post(Event::Opened { id, open, error: Some(e.to_string()) });
        }
        let held = self.pretrained.as_ref().map_or(0, |p| 4 * p.model.params.len() as u64);
        let fits_beside = held > 0 && Pretrained::check(files.config, file, MODEL_BUDGET.saturating_sub(held)).is_ok();
        if !fits_beside {
            self.pretrained = None;
        }
        // The GPU's copy (or its refusal) is of the model open before; the next reading on the GPU
        // uploads the new one.
        self.gpu = None;
        let error = match Pretrained::from_files(&name, files, MODEL_BUDGET) {
            Ok(p) => {
                self.pretrained = Some(p);
                None
            }
            Err(e) => Some(e.to_string()),
        };
        self.post(Event::Opened { id, open: self.pretrained.as_ref().map(summary), error });
    }

    /// Reads `text`: every layer's panels at once, then the depth fits (the slow part) after the
    /// page has had them.
    pub(super) async fn read(&mut self, text: &str, id: u64) {
        let Some(p) = self.pretrained.as_ref() else {
            return self.post(Event::Reading { id, result: Err("open a model first".into()) });
        };
        if let Err(e) = lenses::tokens_to_draw(p, text, MODEL_BUDGET) {
            return self.post(Event::Reading { id, result: Err(e.to_string()) });
        }
        // On the GPU, or why the CPU reads it (none: the CPU was asked for).
        let on_gpu = match (self.backend, &self.gpu) {
            (BackendChoice::Cpu, _) => Err(None),
            // The GPU failed this model before: the CPU, until the backend or the model changes.
            (_, Some(Err(why))) => Err(Some(format!("CPU (WebGPU: {why})"))),
            _ => match gpu_read(&mut self.gpu, self.backend, p, text).await {
                Ok(r) => Ok(r),
                Err(GpuError::Engine(e)) => return self.post(Event::Reading { id, result: Err(e.to_string()) }),
                // Any GPU failure (none, software under auto, weights over its limit, a lost
                // device) leaves the reading to the CPU, which says why.
                Err(e) => {
                    self.gpu = Some(Err(e.to_string()));
                    Err(Some(format!("CPU (WebGPU: {e})")))
                }
            },
        };
        let read = match on_gpu {
            Ok(r) => Ok(r),
            Err(why) => lenses::read(p, text, MODEL_BUDGET).map(|r| Read { on: why.unwrap_or(r.on), ..r }),
        };
        let mut reading = match read.and_then(|r| lenses::first_view(p, r)) {
            Ok(r) => r,
            Err(e) => return self.post(Event::Reading { id, result: Err(e.to_string()) }),
        };
        // Moved out, not copied: every head's attention is the largest thing the worker holds.
        let (inspection, mut panels) = (reading.inspection.clone(), std::mem::take(&mut reading.panels));
        let bulk = vec![protocol::floats(&panels.sphere), protocol::floats(&panels.attention)];
        (panels.sphere, panels.attention) = (vec![], vec![]);
        let event = Event::Reading { id, result: Ok((Box::new(inspection), Box::new(panels))) };
        self.mailbox.post(&event, bulk, 0);
        yield_now().await;
        let Some(p) = self.pretrained.as_ref() else { return };
        let began = now_ms();
        let depth = reading.fit_depth(p);
        crate::js::slow_down(now_ms() - began, self.slowdown);
        self.post(Event::Depth { id, depth: Box::new(depth) });
    }

    /// Reads both texts on the CPU and compares them (the lenses are measured on the CPU anyway,
    /// and two passes of a small model take about a second).
    pub(super) fn compare(&self, texts: &[String; 2], id: u64) {
        let result = match self.pretrained.as_ref() {
            // Both passes are held at once: the second within what the first leaves.
            Some(p) => lenses::read(p, &texts[0], MODEL_BUDGET)
                .and_then(|a| {
                    let left = MODEL_BUDGET.saturating_sub(memory::read_bytes(&p.model.cfg, a.ids.len())?);
                    lenses::read(p, &texts[1], left).map(|b| (a, b))
                })
                .and_then(|(a, b)| lenses::compare(p, &a, &b))
                .map(Box::new)
                .map_err(|e| e.to_string()),
            None => Err("open a model first".into()),
        };
        self.post(Event::Compared { id, result });
    }

    /// The logit lens of a reading's tokens, read again on the CPU (1 + L heads: a few seconds
    /// for GPT-2 small).
    pub(super) fn logit_lens(&self, tokens: Vec<u32>, id: u64) {
        let result = match self.pretrained.as_ref() {
            Some(p) => lenses::read_ids(p, tokens, MODEL_BUDGET)
                .and_then(|r| lenses::logit_lens(p, &r))
                .map(Box::new)
                .map_err(|e| e.to_string()),
            None => Err("open a model first".into()),
        };
        self.post(Event::LogitLens { id, result });
    }

    /// A training history's checkpoint: opened beside the model open now (within what the tab may
    /// hold), read on the CPU, measured and dropped.
    pub(super) fn measure(&self, step: u64, name: &str, names: &[String], bulk: &[JsValue], texts: &[String], id: u64) {
        let bytes: Vec<Vec<u8>> = (0..names.len()).map(|i| protocol::bytes_of(bulk.get(i))).collect();
        let held = self.pretrained.as_ref().map_or(0, |p| 4 * p.model.params.len() as u64);
        let result = files(names, &bytes)
            .and_then(|f| Pretrained::from_files(name, f, MODEL_BUDGET.saturating_sub(held)).map_err(|e| e.to_string()))
            .and_then(|p| {
                let readings = texts
                    .iter()
                    .map(|t| {
                        lenses::read(&p, t, MODEL_BUDGET.saturating_sub(held)).and_then(|r| lenses::inspect(&p, &r))
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                history::checkpoint(step, name, &p, &readings).map_err(|e| e.to_string())
            });
        self.post(Event::Measured { id, result: result.map(Box::new) });
    }

    pub(super) fn sample_model(&mut self, spec: &SampleSpec, id: u64) {
        let result = match self.pretrained.as_ref() {
            Some(p) => p
                .check_writing(spec)
                .and_then(|()| sample::generate(&p.model, &p.tokenizer, spec))
                .map_err(|e| e.to_string()),
            None => Err("open a model first".into()),
        };
        self.post(Event::Samples { id, result });
    }
}

/// `text` read on the GPU, through the reader of the open model (made on the first reading).
/// Under auto a software adapter (or none) is refused: the CPU path is faster there.
async fn gpu_read(
    gpu: &mut Option<Result<GpuReader, String>>,
    backend: BackendChoice,
    p: &Pretrained,
    text: &str,
) -> Result<Read, GpuError> {
    if gpu.is_none() {
        let ctx = GpuContext::new().await?;
        if backend == BackendChoice::Auto && ctx.is_software() {
            let why = format!("only a software one ({}), slower than the CPU", ctx.adapter_name());
            return Err(GpuError::NoAdapter(why));
        }
        *gpu = Some(Ok(GpuReader::new(ctx, &p.model)?));
    }
    let Some(Ok(r)) = gpu.as_ref() else {
        return Err(GpuError::NoAdapter("the GPU refused this model before".into()));
    };
    let ids = lenses::tokens_within(p, text, MODEL_BUDGET)?;
    let (cache, logits) = r.read(&ids).await?;
    Ok(Read { ids, cache, logits, on: format!("WebGPU ({})", r.context().adapter_name()) })
}
