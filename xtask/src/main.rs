//! Spherewalk's task runner.
//!
//! ```text
//! cargo xtask setup   install what is missing (idempotent; apt needs root)       setup.rs
//! cargo xtask dist    build the page into dist/, ready for any static host        dist.rs
//! cargo xtask serve   build dist/ and serve it on http://127.0.0.1:8080           serve.rs
//! cargo xtask test    native tests, wasm tests in headless Chromium, page build,  test.rs
//!                     browser tests
//! ```
//!
//! `dist`, `serve` and `test` install what they need first. The crate is small (std, and the
//! compressors for the English text and dist/'s precompressed files) so it builds in seconds.

use std::env;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

mod corpus;
mod dist;
/// The house rules, a test of this crate (so `cargo test` and `cargo xtask test` check them).
#[cfg(test)]
mod house;
mod serve;
mod setup;
mod test;

const TRUNK_VERSION: &str = "0.21.14";
/// Must equal the `wasm-bindgen` pinned (with `=`) in the root Cargo.toml.
const WASM_BINDGEN_VERSION: &str = "0.2.130";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The browser and its driver, lavapipe for WebGPU natively, and a real English corpus for JoMA
/// (the fortunes databases: the science tests never download text), and numpy for the
/// independent GPT-2 forward the model-opening tests check against (`engine/tests/gpt2`).
// make and gcc build jemalloc, the `lab` binary's allocator (tikv-jemalloc-sys).
const APT_PACKAGES: &[&str] =
    &["chromium", "chromium-driver", "mesa-vulkan-drivers", "libvulkan1", "fortunes", "python3-numpy", "make", "gcc"];
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const SERVE_PORT: u16 = 8080;

type Result<T = (), E = Error> = std::result::Result<T, E>;

/// A failure with a message meant for a person.
#[derive(Debug)]
struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error(e.to_string())
    }
}

fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error(msg.into()))
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let ctx = match Ctx::new() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("xtask: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args.first().map(String::as_str) {
        Some("setup") => ctx.setup(),
        Some("dist") => ctx.dist(&args[1..]),
        Some("serve") => ctx.serve(&args[1..]),
        Some("test") => ctx.test(&args[1..]),
        Some("-h" | "--help" | "help") | None => {
            print_help();
            return if args.is_empty() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
        Some(other) => {
            eprintln!("xtask: unknown command `{other}`\n");
            print_help();
            return ExitCode::FAILURE;
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nxtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_help() {
    println!(
        "Spherewalk tasks

usage: cargo xtask <command>

  setup            install what is missing: Chromium + chromedriver + Mesa Vulkan + fortunes + numpy (apt, root),
                   the {WASM_TARGET} target, trunk {TRUNK_VERSION}, wasm-bindgen-cli {WASM_BINDGEN_VERSION},
                   e2e/node_modules (binaryen's wasm-opt, playwright-core), and public/data/austen.txt
                   (Pride and Prejudice, unpacked from Debian's r-cran-janeaustenr)
  dist             build the release page into dist/: one folder for any static host at any path
                   (relative URLs, a service worker for offline use, .gz and .br beside large files)
  serve [--port N] dist, then serve dist/ on http://127.0.0.1:{SERVE_PORT}
  test             setup, then: native tests, the engine's wasm tests in headless Chromium
                   (WebGPU parity on SwiftShader included), the release page build, and the Playwright
                   browser test of the page
  test --no-setup  the same without the setup step"
    );
}

struct Ctx {
    root: PathBuf,
    cargo: OsString,
    /// PATH for every child: e2e/node_modules/.bin (wasm-opt) and ~/.cargo/bin first.
    path: OsString,
}

impl Ctx {
    fn new() -> Result<Ctx> {
        let root = match env::var_os("CARGO_MANIFEST_DIR") {
            Some(dir) => PathBuf::from(dir)
                .parent()
                .map(Path::to_path_buf)
                .ok_or_else(|| Error("CARGO_MANIFEST_DIR has no parent".into()))?,
            None => env::current_dir()?,
        };
        if !root.join("Cargo.toml").is_file() || !root.join("index.html").is_file() {
            return fail(format!("{} does not look like the Spherewalk workspace root", root.display()));
        }
        let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut dirs = vec![root.join("e2e").join("node_modules").join(".bin")];
        if let Some(home) = env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        {
            dirs.push(home.join("bin"));
        }
        dirs.extend(env::split_paths(&env::var_os("PATH").unwrap_or_default()));
        let path = env::join_paths(dirs).map_err(|e| Error(format!("bad PATH: {e}")))?;
        Ok(Ctx { root, cargo, path })
    }

    /// A command that runs in the workspace root with our PATH.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.root).env("PATH", &self.path);
        c
    }

    fn cargo(&self) -> Command {
        self.cmd(&self.cargo)
    }

    /// Runs a command with inherited output; a non-zero exit is an error naming it.
    fn run(&self, what: &str, mut c: Command) -> Result {
        println!("xtask: $ {}", show(&c));
        let status = c.status().map_err(|e| Error(format!("{what}: could not start `{}`: {e}", show(&c))))?;
        if status.success() {
            Ok(())
        } else {
            fail(format!("{what} failed ({status}): `{}`", show(&c)))
        }
    }

    /// Runs a command quietly and returns its trimmed stdout, or None if it cannot run or fails.
    fn output(&self, mut c: Command) -> Option<String> {
        let out = c.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn which(&self, name: &str) -> bool {
        env::split_paths(&self.path).any(|d| d.join(name).is_file())
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn banner(name: &str) {
    println!("\n================ {name} ================");
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn show(c: &Command) -> String {
    // `cargo` rather than the toolchain's full path to it.
    let program = Path::new(c.get_program());
    let mut s = match program.file_name() {
        Some(name) if name == "cargo" => "cargo".to_string(),
        _ => program.to_string_lossy().into_owned(),
    };
    for a in c.get_args() {
        let a = a.to_string_lossy();
        if a.contains(' ') {
            s.push_str(&format!(" '{a}'"));
        } else {
            s.push(' ');
            s.push_str(&a);
        }
    }
    s
}
