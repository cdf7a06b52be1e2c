//! The model worker: a real model opened from its files (`config.json`, `model.safetensors` and
//! its tokenizer's files), reading the visitor's texts and writing after them. It is a worker of
//! its own, loaded only when the page opens a model, so the training page's first visit carries
//! neither a tokenizer library nor a model's code; the engine does the work (`engine::pretrained`),
//! here it is received, kept and answered (`reading`).

mod reading;

use engine::gpu::reader::GpuReader;
use engine::pretrained::Pretrained;
use engine::session::BackendChoice;

use crate::protocol::{Command, Event, TestHook};
use crate::worker::mailbox::Mailbox;

/// Starts the model worker: listens for commands and says it is ready.
pub fn start() {
    let mailbox = Mailbox::open();
    wasm_bindgen_futures::spawn_local(Reader::new(mailbox).run());
}

struct Reader {
    mailbox: Mailbox,
    backend: BackendChoice,
    /// The model open now.
    pretrained: Option<Pretrained>,
    /// Its weights on the GPU once a reading has run there, or why the GPU could not read it.
    gpu: Option<Result<GpuReader, String>>,
    /// A test's: each reading's stage takes this many times its own time (a slower machine).
    slowdown: f64,
}

impl Reader {
    fn new(mailbox: Mailbox) -> Self {
        Reader { mailbox, backend: BackendChoice::Auto, pretrained: None, gpu: None, slowdown: 1.0 }
    }

    fn post(&self, event: Event) {
        self.mailbox.post(&event, vec![], 0);
    }

    async fn run(mut self) {
        self.post(Event::Ready { engine: engine::VERSION.into() });
        loop {
            let (cmd, bulk, _) = self.mailbox.next().await;
            match cmd {
                Command::OpenModel { name, files, id } => self.open_model(name, &files, &bulk, id),
                Command::Read { text, id } => self.read(&text, id).await,
                Command::Compare { texts, id } => self.compare(&texts, id),
                Command::LogitLens { tokens, id } => self.logit_lens(tokens, id),
                Command::MeasureCheckpoint { step, name, files, texts, id } => {
                    self.measure(step, &name, &files, &bulk, &texts, id)
                }
                Command::SampleModel { spec, id } => self.sample_model(&spec, id),
                Command::SetBackend { choice } => {
                    self.backend = choice;
                    // A reading refused on the GPU is tried there again.
                    self.gpu = self.gpu.take().filter(|r| r.is_ok());
                }
                Command::Test(TestHook::Slowdown { factor }) => self.slowdown = factor.max(1.0),
                // What a bug or a failed allocation does to the wasm: the page must notice.
                Command::Test(TestHook::Trap) => core::arch::wasm32::unreachable(),
                _ => {
                    self.post(Event::Error { text: "the model worker opens, reads and writes a model; no more".into() })
                }
            }
        }
    }
}
