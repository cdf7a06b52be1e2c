//! `cargo xtask setup`: installs what is missing, once (apt needs root; the rest is per user).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{
    corpus, fail, is_root, secs, Ctx, Error, Result, APT_PACKAGES, CHROMEDRIVER, CHROMIUM, TRUNK_VERSION,
    WASM_BINDGEN_VERSION, WASM_TARGET,
};

impl Ctx {
    /// Everything the tests need: the browsers and test packages (apt), then what a build needs.
    pub(crate) fn setup(&self) -> Result {
        let t = Instant::now();
        println!("xtask: setup (installs only what is missing)");
        self.setup_apt()?;
        self.setup_build()?;
        println!("xtask: setup done in {}", secs(t.elapsed()));
        Ok(())
    }

    /// What building the page needs, no browser: the wasm target, Trunk, wasm-bindgen, binaryen
    /// (npm), the English text, and the crates (`trunk --offline` makes cargo offline too).
    pub(crate) fn setup_build(&self) -> Result {
        self.setup_rust_target()?;
        self.setup_trunk()?;
        self.setup_wasm_bindgen()?;
        self.setup_npm()?;
        self.setup_corpus()?;
        self.fetch()
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
            println!("xtask:   chromium, chromedriver, Mesa Vulkan, fortunes, numpy, make, gcc: present");
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

    fn fetch(&self) -> Result {
        let mut c = self.cargo();
        c.arg("fetch");
        self.run("cargo fetch", c)
    }
}
