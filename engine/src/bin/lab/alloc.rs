//! The lab's allocator: jemalloc, asking the kernel for transparent huge pages (this machine's
//! kernel gives them only where asked). A text read keeps every layer's activations for the
//! lenses (GPT-2 small at 256 tokens: about 190 MB), and the system allocator's fresh 4 KiB pages,
//! each zeroed on its first touch, made a fifth of that forward pass page faults: measured in
//! docs/measured.md. jemalloc also keeps freed pages for the next text instead of returning them.

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: huge pages for its arenas and for its own metadata.
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: Option<&std::ffi::c_char> = Some(unsafe { &*c"thp:always,metadata_thp:always".as_ptr() });
