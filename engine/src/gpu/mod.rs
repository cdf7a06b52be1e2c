//! The WebGPU compute backend: the CPU engine's kernels rewritten in WGSL and run through wgpu,
//! natively (Vulkan, Metal, DX12) and in the browser (WebGPU). The CPU engine stays the reference:
//! every kernel here is tested against the CPU function it mirrors.
//!
//! Conventions shared by all kernels:
//! - Tensors are f32 storage buffers ([`Tensor`]) addressed by element offsets passed in a uniform,
//!   so one flat parameter buffer can hold every weight (as `params::Layout` lays it out) without
//!   WebGPU's 256-byte binding-offset alignment getting in the way.
//! - A kernel family builds its pipelines once; a call builds an [`Op`] (uniforms plus bind group)
//!   that can be recorded any number of times, so a training step is a fixed list of ops.
//! - Workgroups have at most 256 invocations, the limit of browsers' software adapters.
//! - The API is async; natively [`block_on`] drives it, in the browser it is awaited.

pub mod activation;
pub mod adamw;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod cgfac;
pub mod cross_entropy;
pub mod elementwise;
pub mod embedding;
pub mod forward;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod kernel_tests;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod large_grids;
pub mod layer_norm;
pub mod matmul;
pub mod muon;
pub mod reader;
pub mod rotary;
pub mod sgd;
pub mod softmax;
pub mod trainer;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[cfg(not(target_arch = "wasm32"))]
pub use pollster::block_on;

use wgpu::util::DeviceExt;

/// What can go wrong on the GPU path; every message says what to do or what was missing.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    #[error("GPU device request failed on {adapter}: {reason}")]
    Device { adapter: String, reason: String },
    #[error(
        "GPU buffer of {} is over the adapter's limit of {} ({bytes} > {limit} bytes)",
        crate::memory::human(*bytes),
        crate::memory::human(*limit)
    )]
    TooLarge { bytes: u64, limit: u64 },
    #[error("GPU readback failed: {0}")]
    Readback(String),
    /// The device was lost or rejected work (out of memory, validation): its buffers are gone or
    /// stale, so the run must continue from a host copy of the state.
    #[error("GPU device failed: {0}")]
    Failed(String),
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

pub type Result<T> = std::result::Result<T, GpuError>;

/// The invocations of every 1-D kernel's workgroup (kept equal to `@workgroup_size` in the WGSL).
pub const WG: u32 = 256;
const _: () = assert!(WG == 256, "the WGSL kernels hard-code 256 invocations");

/// A device and its queue, with the adapter they came from.
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    /// The staging buffer for readbacks, grown on demand and reused.
    staging: Mutex<Option<wgpu::Buffer>>,
    /// The first device error or loss, recorded by wgpu's callbacks (whose default is to panic)
    /// and reported by the next readback.
    fault: Arc<Mutex<Option<String>>>,
    /// Readbacks so far: each one waits for the device, so the training step is tested to need few.
    reads: AtomicUsize,
}

impl GpuContext {
    /// The first adapter on any backend wgpu was built with (`WGPU_BACKEND` narrows it).
    pub async fn new() -> Result<Self> {
        let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        Self::with_options(desc, &wgpu::RequestAdapterOptions::default()).await
    }

    /// The first adapter, with its buffers capped at `bytes` (or its own limit, if lower): a GPU
    /// shared with other work, or a test of what happens past the limit.
    pub async fn with_max_buffer(bytes: u64) -> Result<Self> {
        let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        let cap = |l: wgpu::Limits| wgpu::Limits {
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size.min(bytes),
            max_buffer_size: l.max_buffer_size.min(bytes),
            ..l
        };
        Self::open(desc, &wgpu::RequestAdapterOptions::default(), cap).await
    }

    /// An adapter from an explicit instance description and adapter options.
    pub async fn with_options(
        desc: wgpu::InstanceDescriptor,
        options: &wgpu::RequestAdapterOptions<'_, '_>,
    ) -> Result<Self> {
        Self::open(desc, options, |l| l).await
    }

    /// `limits` maps the adapter's limits to those requested.
    async fn open(
        desc: wgpu::InstanceDescriptor,
        options: &wgpu::RequestAdapterOptions<'_, '_>,
        limits: impl FnOnce(wgpu::Limits) -> wgpu::Limits,
    ) -> Result<Self> {
        let backends = desc.backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = instance.request_adapter(options).await.map_err(|e| {
            GpuError::NoAdapter(format!(
                "{e} (backends {backends:?}; natively install a Vulkan driver such as Mesa's lavapipe, \
                 in Chromium pass --enable-unsafe-webgpu)"
            ))
        })?;
        let info = adapter.get_info();
        // The adapter's own limits: software adapters allow far more than WebGPU's defaults.
        let desc = wgpu::DeviceDescriptor {
            label: Some("spherewalk"),
            required_limits: limits(adapter.limits()),
            ..Default::default()
        };
        let (device, queue) = adapter
            .request_device(&desc)
            .await
            .map_err(|e| GpuError::Device { adapter: info.name.clone(), reason: e.to_string() })?;
        let fault = Arc::new(Mutex::new(None));
        let record = |fault: &Arc<Mutex<Option<String>>>| {
            let fault = fault.clone();
            move |msg: String| {
                fault.lock().expect("fault lock").get_or_insert(msg);
            }
        };
        let on_error = record(&fault);
        device.on_uncaptured_error(Arc::new(move |e| on_error(e.to_string())));
        let on_lost = record(&fault);
        device.set_device_lost_callback(move |reason, msg| {
            on_lost(format!("device lost ({reason:?}) {msg}").trim_end().into())
        });
        Ok(GpuContext { device, queue, info, staging: Mutex::new(None), fault, reads: AtomicUsize::new(0) })
    }

    /// How many readbacks this context has made.
    pub fn readbacks(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }

    /// The first error the device reported (a loss, out of memory, a rejected command), if any.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().expect("fault lock").clone()
    }

    /// "name (backend, device type)", for reports and logs.
    pub fn adapter_name(&self) -> String {
        // Browsers may withhold the name (Chromium's SwiftShader gives "").
        let name = if self.info.name.is_empty() { "unnamed adapter" } else { &self.info.name };
        format!("{name} ({:?}, {:?})", self.info.backend, self.info.device_type)
    }

    /// A software rasterizer (SwiftShader, lavapipe): correct, but slower than the CPU engine.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// A zeroed f32 storage tensor of `len` elements.
    pub fn tensor(&self, label: &str, len: usize) -> Result<Tensor> {
        let bytes = self.check_size(len)?;
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes,
            usage: Tensor::USAGE,
            mapped_at_creation: false,
        });
        Ok(Tensor { buf, len })
    }

    /// A storage tensor holding `data` (f32, or u32 token ids).
    pub fn tensor_from<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<Tensor> {
        let bytes = self.check_size(data.len())? as usize;
        let mut contents = bytemuck::cast_slice::<T, u8>(data).to_vec();
        contents.resize(bytes, 0);
        let buf = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents: &contents,
            usage: Tensor::USAGE,
        });
        Ok(Tensor { buf, len: data.len() })
    }

    /// Overwrites the start of `t` with `data`; ordered before the next submission.
    pub fn write<T: bytemuck::Pod>(&self, t: &Tensor, data: &[T]) {
        assert!(data.len() <= t.len, "write of {} values into a tensor of {}", data.len(), t.len);
        if !data.is_empty() {
            self.queue.write_buffer(&t.buf, 0, bytemuck::cast_slice(data));
        }
    }

    fn check_fault(&self) -> Result<()> {
        self.fault().map_or(Ok(()), |msg| Err(GpuError::Failed(msg)))
    }

    fn check_size(&self, len: usize) -> Result<u64> {
        // At least one vec4 (WebGPU rejects zero-sized bindings), and whole vec4s, so that
        // matmul's wide kernel can read any tensor as an array of them.
        let bytes = 16 * len.div_ceil(4).max(1) as u64;
        let limit = self.device.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(GpuError::TooLarge { bytes, limit });
        }
        Ok(bytes)
    }

    /// Records `ops` in one compute pass and submits them.
    pub fn run(&self, ops: &[&Op]) {
        self.run_cleared(&[], ops);
    }

    /// Zeroes `clear`, then records `ops` in one compute pass, in one submission.
    pub fn run_cleared(&self, clear: &[&Tensor], ops: &[&Op]) {
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("ops") });
        for t in clear {
            enc.clear_buffer(&t.buf, 0, None);
        }
        {
            let mut pass =
                enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("ops"), timestamp_writes: None });
            for op in ops {
                op.record(&mut pass);
            }
        }
        self.queue.submit([enc.finish()]);
    }

    /// Reads `len` values of `t` from element `offset` back to the host, after all submitted work.
    /// Natively this waits on the device; in the browser the returned future resolves when the
    /// mapping callback fires, so nothing blocks.
    pub async fn read<T: bytemuck::Pod>(&self, t: &Tensor, offset: usize, len: usize) -> Result<Vec<T>> {
        assert!(offset + len <= t.len, "read of {offset}..{} from a tensor of {}", offset + len, t.len);
        Ok(self.read_parts(&[(t, offset, len)]).await?.pop().expect("one part"))
    }

    /// Reads whole tensors back in one readback: one wait for the device, however many there are.
    pub async fn read_tensors<T: bytemuck::Pod>(&self, ts: &[&Tensor]) -> Result<Vec<Vec<T>>> {
        self.read_parts(&ts.iter().map(|t| (*t, 0, t.len)).collect::<Vec<_>>()).await
    }

    /// Reads `(tensor, offset, len)` parts back through one staging buffer.
    async fn read_parts<T: bytemuck::Pod>(&self, parts: &[(&Tensor, usize, usize)]) -> Result<Vec<Vec<T>>> {
        self.check_fault()?;
        let bytes = 4 * parts.iter().map(|p| p.2 as u64).sum::<u64>();
        if bytes == 0 {
            return Ok(vec![Vec::new(); parts.len()]);
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        // Taken out of the slot for the read, so a concurrent read makes its own instead of
        // mapping a buffer that is already mapped.
        let taken = self.staging.lock().expect("staging lock").take();
        let staging = match taken {
            Some(b) if b.size() >= bytes => b,
            _ => self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging"),
                size: bytes.next_power_of_two().max(1024).min(self.device.limits().max_buffer_size.max(bytes)),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
        };
        let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("read") });
        let mut at = 0;
        for &(t, offset, len) in parts {
            if len > 0 {
                enc.copy_buffer_to_buffer(&t.buf, 4 * offset as u64, &staging, at, 4 * len as u64);
            }
            at += 4 * len as u64;
        }
        self.queue.submit([enc.finish()]);
        let (tx, rx) = oneshot();
        staging.map_async(wgpu::MapMode::Read, 0..bytes, move |r| tx.send(r));
        // Natively callbacks only fire from poll; on WebGPU this is a no-op and the browser fires them.
        // A failed poll may leave the map callback unfired: awaiting it would hang.
        if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            self.check_fault()?;
            return Err(GpuError::Readback(e.to_string()));
        }
        let mapped = rx.await;
        // A device fault explains a failed map better than the map error does, and it also makes a
        // map that succeeded worthless: the submitted work may not have run.
        self.check_fault()?;
        mapped.map_err(|e| GpuError::Readback(e.to_string()))?;
        let out = {
            let view = staging.get_mapped_range(0..bytes).map_err(|e| GpuError::Readback(e.to_string()))?;
            let all: &[T] = bytemuck::cast_slice(&view);
            let mut at = 0;
            parts
                .iter()
                .map(|p| {
                    at += p.2;
                    all[at - p.2..at].to_vec()
                })
                .collect()
        };
        staging.unmap();
        *self.staging.lock().expect("staging lock") = Some(staging);
        Ok(out)
    }

    /// Reads a whole tensor back.
    pub async fn read_all<T: bytemuck::Pod>(&self, t: &Tensor) -> Result<Vec<T>> {
        self.read(t, 0, t.len).await
    }

    /// A uniform buffer with `data`, for one op's sizes and offsets.
    fn uniform(&self, data: &[u32]) -> wgpu::Buffer {
        self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("op params"),
            contents: bytemuck::cast_slice(data),
            usage: wgpu::BufferUsages::UNIFORM,
        })
    }
}

/// A flat array of 4-byte values (f32 or u32) on the GPU.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub buf: wgpu::Buffer,
    pub len: usize,
}

impl Tensor {
    const USAGE: wgpu::BufferUsages =
        wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_SRC).union(wgpu::BufferUsages::COPY_DST);
}

/// One dispatch, ready to record: pipeline, bind group (its uniform included) and grid.
#[derive(Clone, Debug)]
pub struct Op {
    pipeline: wgpu::ComputePipeline,
    bind: wgpu::BindGroup,
    grid: [u32; 3],
}

impl Op {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.dispatch_workgroups(self.grid[0], self.grid[1], self.grid[2]);
    }
}

/// How a kernel uses a storage binding.
#[derive(Clone, Copy)]
enum Access {
    Read,
    ReadWrite,
}

/// A kernel family: one WGSL module, one bind group layout (storage bindings 0.. in the order of
/// `access`, then the uniform), one pipeline per entry point.
struct Kernel {
    layout: wgpu::BindGroupLayout,
    pipelines: Vec<wgpu::ComputePipeline>,
}

impl Kernel {
    fn new(ctx: &GpuContext, name: &str, source: &str, access: &[Access], entries: &[&str]) -> Self {
        let dev = &ctx.device;
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(name),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let storage = access.iter().enumerate().map(|(i, a)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: matches!(a, Access::Read) },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
        let uniform = wgpu::BindGroupLayoutEntry {
            binding: access.len() as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let entries_layout: Vec<_> = storage.chain([uniform]).collect();
        let layout = dev
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &entries_layout });
        let pipeline_layout = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipelines = entries
            .iter()
            .map(|entry| {
                dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(entry),
                    layout: Some(&pipeline_layout),
                    module: &module,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .collect();
        Kernel { layout, pipelines }
    }

    /// An op running entry point `entry` on `tensors` (in binding order) with uniform `params`
    /// (padded to 16-byte multiples, as uniform structs are).
    fn op(&self, ctx: &GpuContext, entry: usize, tensors: &[&Tensor], params: &[u32], grid: [u32; 3]) -> Op {
        let mut padded = params.to_vec();
        padded.resize(params.len().div_ceil(4).max(1) * 4, 0);
        let uniform = ctx.uniform(&padded);
        let entries: Vec<_> = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| wgpu::BindGroupEntry { binding: i as u32, resource: t.buf.as_entire_binding() })
            .chain([wgpu::BindGroupEntry { binding: tensors.len() as u32, resource: uniform.as_entire_binding() }])
            .collect();
        let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.layout,
            entries: &entries,
        });
        Op { pipeline: self.pipelines[entry].clone(), bind, grid }
    }
}

/// Workgroups for `n` invocations of a 1-D kernel, spread over y when x would pass WebGPU's
/// 65535 limit; kernels rebuild the index as `gid.x + gid.y * nwg.x * WG`.
/// A kernel's source with the shared workgroup reductions (`wg_sum`, `wg_max`, `row_index`) in front.
fn with_reductions(src: &str) -> String {
    [include_str!("kernels/reductions.wgsl"), src].concat()
}

fn grid_1d(n: usize) -> [u32; 3] {
    let groups = n.div_ceil(WG as usize).max(1) as u32;
    let x = groups.min(65535);
    [x, groups.div_ceil(x), 1]
}

fn f(x: f32) -> u32 {
    x.to_bits()
}

/// A one-value channel whose receiver is a future: the bridge from wgpu's map callback to `await`.
struct Shared<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

struct Sender<T>(Arc<Mutex<Shared<T>>>);
struct Receiver<T>(Arc<Mutex<Shared<T>>>);

fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let s = Arc::new(Mutex::new(Shared { value: None, waker: None }));
    (Sender(s.clone()), Receiver(s))
}

impl<T> Sender<T> {
    fn send(self, v: T) {
        let mut s = self.0.lock().expect("oneshot lock");
        s.value = Some(v);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.0.lock().expect("oneshot lock");
        match s.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod testing {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The test adapter; no adapter is a failure, since CI installs lavapipe.
    pub fn ctx() -> GpuContext {
        match block_on(GpuContext::new()) {
            Ok(c) => c,
            Err(e) => panic!("{e}; GPU tests need an adapter (apt-get install mesa-vulkan-drivers libvulkan1)"),
        }
    }

    pub fn random(n: usize, seed: u64) -> Vec<f32> {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect()
    }

    /// max |a - b| / (1 + |b|): relative for large values, absolute near zero.
    pub fn max_err(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
    }

    pub fn read(ctx: &GpuContext, t: &Tensor) -> Vec<f32> {
        block_on(ctx.read_all(t)).expect("readback")
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn context_names_the_adapter_and_round_trips_a_buffer() {
        let ctx = ctx();
        assert!(!ctx.info.name.is_empty());
        eprintln!("adapter: {}", ctx.adapter_name());
        let data = random(1000, 1);
        let t = ctx.tensor_from("t", &data).unwrap();
        assert_eq!(read(&ctx, &t), data);
        assert_eq!(block_on(ctx.read::<f32>(&t, 10, 5)).unwrap(), data[10..15]);
    }

    #[test]
    fn no_adapter_is_a_clear_error_not_a_panic() {
        // No backends at all: nothing can satisfy the request.
        let desc = wgpu::InstanceDescriptor {
            backends: wgpu::Backends::empty(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        };
        let err = block_on(GpuContext::with_options(desc, &wgpu::RequestAdapterOptions::default()))
            .err()
            .expect("an instance without backends has no adapter");
        let msg = err.to_string();
        assert!(msg.starts_with("no GPU adapter: "), "{msg}");
    }

    #[test]
    fn oversized_tensor_is_an_error() {
        let ctx = ctx();
        let limit = ctx.device.limits().max_storage_buffer_binding_size;
        let err = ctx.tensor("huge", (limit / 4 + 1) as usize).unwrap_err();
        assert!(matches!(err, GpuError::TooLarge { .. }), "{err}");
    }
}
