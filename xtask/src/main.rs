//! Spherewalk's task runner.
//!
//! ```text
//! cargo xtask setup   install what is missing (idempotent; apt needs root)
//! cargo xtask serve   build the page and serve it on http://127.0.0.1:8080
//! cargo xtask test    native tests, wasm tests in headless Chromium, page build, browser test
//! ```
//!
//! `serve` and `test` run `setup` first. Everything is plain std (and miniz_oxide, for the English
//! text) so this crate builds in seconds on a fresh machine.

use std::env;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod corpus;

const TRUNK_VERSION: &str = "0.21.14";
/// Must equal the `wasm-bindgen` pinned (with `=`) in the root Cargo.toml.
const WASM_BINDGEN_VERSION: &str = "0.2.130";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The browser and its driver, lavapipe for WebGPU natively, and a real English corpus for JoMA
/// (the fortunes databases: the science tests never download text), and numpy for the
/// independent GPT-2 forward the model-opening tests check against (`engine/tests/gpt2`).
const APT_PACKAGES: &[&str] =
    &["chromium", "chromium-driver", "mesa-vulkan-drivers", "libvulkan1", "fortunes", "python3-numpy"];
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
  serve [--port N] setup, then build the page in release mode and serve it on http://127.0.0.1:{SERVE_PORT}
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

    // ---------------------------------------------------------------- setup

    fn setup(&self) -> Result {
        let t = Instant::now();
        println!("xtask: setup (installs only what is missing)");
        self.setup_apt()?;
        self.setup_rust_target()?;
        self.setup_trunk()?;
        self.setup_wasm_bindgen()?;
        self.setup_npm()?;
        self.setup_corpus()?;
        println!("xtask: setup done in {}", secs(t.elapsed()));
        Ok(())
    }

    fn setup_apt(&self) -> Result {
        let mut missing: Vec<String> =
            [CHROMIUM, CHROMEDRIVER].iter().filter(|p| !Path::new(p).exists()).map(|p| p.to_string()).collect();
        for pkg in &APT_PACKAGES[2..] {
            let mut q = Command::new("dpkg-query");
            q.args(["-W", "-f=${Status}", pkg]);
            if !self.output(q).is_some_and(|s| s.ends_with("installed") && !s.contains("not-installed")) {
                missing.push((*pkg).to_string());
            }
        }
        if missing.is_empty() {
            println!("xtask:   chromium, chromedriver, Mesa Vulkan, fortunes, numpy: present");
            return Ok(());
        }
        println!("xtask:   missing {}: installing {} with apt-get", missing.join(", "), APT_PACKAGES.join(" "));
        if !is_root() {
            return fail(format!(
                "missing {}; run as root, or install them yourself: apt-get install -y {}",
                missing.join(", "),
                APT_PACKAGES.join(" ")
            ));
        }
        let mut update = Command::new("apt-get");
        update.args(["-o", "DPkg::Lock::Timeout=600", "update"]);
        self.run("apt-get update", update)?;
        let mut install = Command::new("apt-get");
        install
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-o", "DPkg::Lock::Timeout=600"])
            .args(APT_PACKAGES);
        self.run("apt-get install", install)?;
        for p in [CHROMIUM, CHROMEDRIVER] {
            if !Path::new(p).exists() {
                return fail(format!("{p} is still missing after apt-get install"));
            }
        }
        Ok(())
    }

    /// The English text (`corpus`): unpacked from its Debian package once, kept in public/data.
    fn setup_corpus(&self) -> Result {
        let out = corpus::target(&self.root);
        if out.metadata().is_ok_and(|m| m.len() > 0) {
            println!("xtask:   {}: present", out.display());
            return Ok(());
        }
        let work = self.root.join("target").join("corpus");
        fs::create_dir_all(&work)?;
        let download = || {
            let mut c = self.cmd("apt-get");
            c.current_dir(&work).args(["download", corpus::PACKAGE]);
            self.run("apt-get download", c)
        };
        if download().is_err() {
            // A fresh machine may not have the package lists yet.
            let mut update = Command::new("apt-get");
            update.args(["-o", "DPkg::Lock::Timeout=600", "update"]);
            self.run("apt-get update", update)?;
            download()?;
        }
        let deb = fs::read_dir(&work)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| Error(format!("apt-get download left no .deb in {}", work.display())))?;
        let unpacked = work.join("unpacked");
        let mut x = self.cmd("dpkg-deb");
        x.arg("-x").arg(&deb).arg(&unpacked);
        self.run("dpkg-deb -x", x)?;
        let text = corpus::prose(&corpus::novel_lines(&unpacked).map_err(Error)?);
        fs::create_dir_all(out.parent().expect("a folder"))?;
        fs::write(&out, &text)?;
        println!("xtask:   wrote {} ({} KB of Pride and Prejudice)", out.display(), text.len() / 1024);
        Ok(())
    }

    fn setup_rust_target(&self) -> Result {
        let mut list = self.cmd("rustup");
        list.args(["target", "list", "--installed"]);
        match self.output(list) {
            Some(out) if out.lines().any(|l| l.trim() == WASM_TARGET) => {
                println!("xtask:   rust target {WASM_TARGET}: present");
                Ok(())
            }
            Some(_) => {
                let mut add = self.cmd("rustup");
                add.args(["target", "add", WASM_TARGET]);
                self.run("rustup target add", add)
            }
            None => {
                // No rustup (a distro toolchain): check that the target's std is there.
                let mut sysroot = self.cmd("rustc");
                sysroot.args(["--print", "sysroot"]);
                let has =
                    self.output(sysroot).is_some_and(|s| Path::new(&s).join("lib/rustlib").join(WASM_TARGET).is_dir());
                if has {
                    Ok(())
                } else {
                    fail(format!("the {WASM_TARGET} target is missing and rustup is not available to add it"))
                }
            }
        }
    }

    fn tool_version(&self, tool: &str) -> Option<String> {
        let mut c = self.cmd(tool);
        c.arg("--version");
        self.output(c)
    }

    fn setup_trunk(&self) -> Result {
        let want = format!("trunk {TRUNK_VERSION}");
        if self.tool_version("trunk").as_deref() == Some(want.as_str()) {
            println!("xtask:   {want}: present");
            return Ok(());
        }
        println!("xtask:   installing {want} (takes ~10 minutes on 2 cores, once)");
        let mut c = self.cargo();
        c.args(["install", "trunk", "--locked", "--version", TRUNK_VERSION]);
        self.run("installing trunk", c)?;
        self.expect_version("trunk", &want)
    }

    fn setup_wasm_bindgen(&self) -> Result {
        let want = format!("wasm-bindgen {WASM_BINDGEN_VERSION}");
        let runner_ok = self.which("wasm-bindgen-test-runner");
        if runner_ok && self.tool_version("wasm-bindgen").as_deref() == Some(want.as_str()) {
            println!("xtask:   wasm-bindgen-cli {WASM_BINDGEN_VERSION}: present");
            return Ok(());
        }
        println!("xtask:   installing wasm-bindgen-cli {WASM_BINDGEN_VERSION} (~3 minutes, once)");
        // No --locked: the crate's own lockfile wants a webpki-roots version the registry lacks.
        let mut c = self.cargo();
        c.args(["install", "wasm-bindgen-cli", "--version", WASM_BINDGEN_VERSION, "--force"]);
        self.run("installing wasm-bindgen-cli", c)?;
        self.expect_version("wasm-bindgen", &want)
    }

    fn expect_version(&self, tool: &str, want: &str) -> Result {
        match self.tool_version(tool) {
            Some(v) if v == want => Ok(()),
            got => fail(format!(
                "after installing, `{tool} --version` says {got:?}, want {want:?} (is another {tool} earlier on PATH?)"
            )),
        }
    }

    fn setup_npm(&self) -> Result {
        let e2e = self.root.join("e2e");
        let modules = e2e.join("node_modules");
        let bin = modules.join(".bin");
        if bin.join("wasm-opt").is_file() && modules.join("playwright-core").join("package.json").is_file() {
            println!("xtask:   e2e/node_modules (binaryen, playwright-core): present");
            return Ok(());
        }
        if !self.which("npm") || !self.which("node") {
            if !is_root() {
                return fail("node and npm are missing; install Node.js (>= 18) and npm");
            }
            let mut update = Command::new("apt-get");
            update.args(["-o", "DPkg::Lock::Timeout=600", "update"]);
            self.run("apt-get update", update)?;
            let mut install = Command::new("apt-get");
            install.env("DEBIAN_FRONTEND", "noninteractive").args([
                "install",
                "-y",
                "-o",
                "DPkg::Lock::Timeout=600",
                "nodejs",
                "npm",
            ]);
            self.run("apt-get install nodejs npm", install)?;
        }
        let mut c = self.cmd("npm");
        c.current_dir(&e2e);
        if e2e.join("package-lock.json").is_file() {
            c.args(["ci", "--no-audit", "--no-fund"]);
        } else {
            c.args(["install", "--no-audit", "--no-fund"]);
        }
        self.run("npm install in e2e/", c)?;
        if !bin.join("wasm-opt").is_file() {
            return fail("e2e/node_modules/.bin/wasm-opt is missing after npm install");
        }
        Ok(())
    }

    // ---------------------------------------------------------------- serve

    fn serve(&self, args: &[String]) -> Result {
        let mut port = SERVE_PORT;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--port" => {
                    port =
                        it.next().and_then(|p| p.parse().ok()).ok_or_else(|| Error("--port needs a number".into()))?
                }
                other => return fail(format!("serve: unknown argument `{other}`")),
            }
        }
        self.setup()?;
        self.fetch()?;
        println!("xtask: serving on http://127.0.0.1:{port} (release build; Ctrl-C stops)");
        let mut c = self.cmd("trunk");
        c.args(["serve", "--release", "--offline", "--address", "127.0.0.1", "--port"]).arg(port.to_string());
        self.run("trunk serve", c)
    }

    fn fetch(&self) -> Result {
        // `trunk --offline` makes cargo offline too: download crates first.
        let mut c = self.cargo();
        c.arg("fetch");
        self.run("cargo fetch", c)
    }

    // ---------------------------------------------------------------- test

    fn test(&self, args: &[String]) -> Result {
        let mut do_setup = true;
        for a in args {
            match a.as_str() {
                "--no-setup" => do_setup = false,
                other => return fail(format!("test: unknown argument `{other}`")),
            }
        }
        let total = Instant::now();
        let mut steps: Vec<(&str, Duration, Result<String>)> = Vec::new();
        let mut step = |name: &'static str, f: &dyn Fn() -> Result<String>| {
            banner(name);
            let t = Instant::now();
            let r = f();
            if let Err(e) = &r {
                eprintln!("xtask: step `{name}` FAILED: {e}");
            }
            steps.push((name, t.elapsed(), r));
            steps.last().map(|s| s.2.is_ok()).unwrap_or(false)
        };

        let ready = if do_setup {
            step("setup", &|| self.setup().and_then(|_| self.fetch()).map(|_| String::new()))
        } else {
            true
        };
        if ready {
            step("native tests", &|| self.native_tests().map(|_| String::new()));
            step("wasm tests (headless Chromium)", &|| self.wasm_tests().map(|_| String::new()));
            if step("page build (trunk --release)", &|| self.page_build()) {
                step("browser test (Playwright)", &|| self.browser_test().map(|_| String::new()));
            }
        }

        let mut passed = 0;
        let mut failed = 0;
        println!("\n================ Spherewalk test summary ================");
        for (name, took, r) in &steps {
            match r {
                Ok(note) => {
                    passed += 1;
                    let note = if note.is_empty() { String::new() } else { format!("  ({note})") };
                    println!("  ok      {name:<34} {:>8}{note}", secs(*took));
                }
                Err(e) => {
                    failed += 1;
                    println!("  FAILED  {name:<34} {:>8}  {e}", secs(*took));
                }
            }
        }
        if !ready {
            println!("  (the other steps did not run: setup failed)");
        }
        println!("  total {}", secs(total.elapsed()));
        if failed == 0 && ready {
            println!("xtask: all {passed} steps passed");
        } else {
            println!("xtask: {failed} of {} steps FAILED", passed + failed);
        }
        if failed == 0 && ready {
            Ok(())
        } else {
            fail(format!("{failed} step(s) failed; see the messages above"))
        }
    }

    fn native_tests(&self) -> Result {
        let mut c = self.cargo();
        c.args(["test", "--workspace", "--exclude", "app"]);
        // The GPU tests run on Mesa's lavapipe; a private runtime dir keeps Mesa from warning.
        let xdg = env::temp_dir().join("spherewalk-xdg");
        fs::create_dir_all(&xdg)?;
        c.env("XDG_RUNTIME_DIR", xdg);
        self.run("native tests", c)
    }

    fn wasm_tests(&self) -> Result {
        self.run("engine wasm tests", self.wasm_test_command(&[]))?;
        // The GPU parity test: WebGPU on Chromium's SwiftShader against the CPU engine.
        self.run("engine WebGPU tests", self.wasm_test_command(&["--features", "gpu", "--test", "wasm_gpu"]))
    }

    /// `cargo test` of the engine for wasm32 in headless Chromium, with `extra` cargo arguments.
    fn wasm_test_command(&self, extra: &[&str]) -> Command {
        let mut c = self.cargo();
        c.args(["test", "-p", "engine", "--no-default-features", "--target", WASM_TARGET])
            .args(extra)
            .env("CHROMEDRIVER", CHROMEDRIVER)
            // SwiftShader runs the WebGPU parity tests on the CPU: generous on a loaded 2-core machine.
            .env("WASM_BINDGEN_TEST_TIMEOUT", "300")
            // Run in the browser even where a test file has no `run_in_browser` configure line.
            .env("WASM_BINDGEN_USE_BROWSER", "1")
            // Chromium flags (WebGPU on SwiftShader, closed network); the runner adds
            // headless and no-sandbox on top of them.
            .env("WASM_BINDGEN_TEST_WEBDRIVER_JSON", self.root.join("engine").join("webdriver.json"))
            // webdriver.json (engine/) carries the Chromium flags; none of the other drivers.
            .env_remove("GECKODRIVER")
            .env_remove("SAFARIDRIVER")
            .env_remove("NO_HEADLESS");
        c
    }

    /// Builds dist/ and returns a note with the wasm size.
    fn page_build(&self) -> Result<String> {
        let dist = self.root.join("dist");
        let mut c = self.cmd("trunk");
        c.args(["build", "--release", "--offline"]);
        self.run("trunk build", c)?;
        // Two wasm files: the page (app-<hash>_bg.wasm) and its training worker (worker_bg.wasm).
        let mut wasm: Vec<PathBuf> = fs::read_dir(&dist)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        wasm.sort();
        if wasm.len() != 2 {
            return fail(format!(
                "trunk build produced {} .wasm files in dist/, expected the page's and the worker's",
                wasm.len()
            ));
        }
        let mut notes = Vec::new();
        for w in &wasm {
            let size = fs::metadata(w)?.len();
            let mut gz = self.cmd("sh");
            gz.arg("-c").arg("gzip -9 -c \"$1\" | wc -c").arg("sh").arg(w);
            let gz = self.output(gz).and_then(|s| s.parse::<u64>().ok());
            notes.push(match gz {
                Some(g) => format!("{}: {} KiB, {} KiB gzipped", file_name(w), size / 1024, g / 1024),
                None => format!("{}: {} KiB", file_name(w), size / 1024),
            });
        }
        let note = notes.join("; ");
        println!("xtask: page built: dist/{note}");
        Ok(note)
    }

    fn browser_test(&self) -> Result {
        let dist = self.root.join("dist");
        // The random-weight GPT-2 the page opens, under the hub's path layout (never the network).
        let hub = dist.join("hub/spherewalk/gpt2-fixture/resolve/main");
        let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut fixture = self.cmd(python);
        fixture.arg(self.root.join("engine/tests/gpt2/fixture.py")).arg(&hub);
        self.run("the GPT-2 fixture (numpy)", fixture)?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}/");
        thread::spawn(move || serve_static(listener, dist));
        println!("xtask: serving dist/ on {url} for the browser test");
        fs::create_dir_all(self.root.join("e2e").join("artifacts"))?;
        let mut c = self.cmd("node");
        c.args(["--test", "--test-reporter=spec", "e2e/page.test.mjs"])
            .env("SPHEREWALK_URL", &url)
            .env("CHROMIUM_PATH", CHROMIUM)
            // The native `lab` (built by the native tests) for the same-config-same-numbers test.
            .env("LAB_BIN", self.root.join("target").join("debug").join("lab"));
        self.run("browser test", c)?;
        println!("xtask: screenshot: e2e/artifacts/page.png");
        Ok(())
    }
}

// -------------------------------------------------------------- static server

/// A tiny static file server for dist/: GET and HEAD, correct MIME types
/// (application/wasm matters: streaming compilation needs it), no caching.
fn serve_static(listener: TcpListener, root: PathBuf) {
    for stream in listener.incoming().flatten() {
        let root = root.clone();
        thread::spawn(move || {
            let _ = handle(stream, &root);
        });
    }
}

fn handle(mut stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Drain the headers.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("/");
    if method != "GET" && method != "HEAD" {
        return respond(&mut stream, "405 Method Not Allowed", "text/plain", b"method not allowed\n", true);
    }
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let Some(file) = resolve(root, path) else {
        return respond(&mut stream, "404 Not Found", "text/plain", b"not found\n", method == "GET");
    };
    match fs::read(&file) {
        Ok(body) => respond(&mut stream, "200 OK", mime(&file), &body, method == "GET"),
        Err(_) => respond(&mut stream, "404 Not Found", "text/plain", b"not found\n", method == "GET"),
    }
}

fn resolve(root: &Path, url_path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(url_path)?;
    let mut file = root.to_path_buf();
    for c in Path::new(decoded.trim_start_matches('/')).components() {
        match c {
            Component::Normal(p) => file.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    file.is_file().then_some(file)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn mime(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &[u8], with_body: bool) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if with_body {
        stream.write_all(body)?;
    }
    stream.flush()?;
    // Let the client read everything before the socket closes.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.read(&mut [0u8; 64]);
    Ok(())
}

// --------------------------------------------------------------------- misc

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn banner(name: &str) {
    println!("\n================ {name} ================");
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_server_resolves_files_and_refuses_escapes() {
        let root = env::temp_dir().join(format!("xtask-static-{}", std::process::id()));
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("index.html"), "<p>hi</p>").unwrap();
        fs::write(root.join("sub").join("a b.wasm"), [0u8, 97, 115, 109]).unwrap();

        assert_eq!(resolve(&root, "/"), Some(root.join("index.html")));
        assert_eq!(resolve(&root, "/sub/a%20b.wasm"), Some(root.join("sub").join("a b.wasm")));
        assert_eq!(resolve(&root, "/missing.js"), None);
        assert_eq!(resolve(&root, "/../etc/passwd"), None);
        assert_eq!(resolve(&root, "/sub/%2e%2e/%2e%2e/etc/passwd"), None);
        assert_eq!(resolve(&root, "/bad%zz"), None);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn mime_types_let_the_browser_stream_wasm() {
        assert_eq!(mime(Path::new("app_bg.wasm")), "application/wasm");
        assert_eq!(mime(Path::new("app.js")), "text/javascript; charset=utf-8");
        assert_eq!(mime(Path::new("index.html")), "text/html; charset=utf-8");
        assert_eq!(mime(Path::new("style.css")), "text/css; charset=utf-8");
        assert_eq!(mime(Path::new("LICENSE")), "application/octet-stream");
    }
}
