//! `cargo xtask dist`: the release page in `dist/`, one folder to upload to any static host at
//! any path.
//!
//! Trunk builds it with every URL relative to the page (`public_url = "./"` in Trunk.toml); then
//! [`seal`] makes the folder one build:
//! - its id, a hash of every file, goes into `index.html` (`<meta name="spherewalk-build">`) and
//!   into `sw.js`, the service worker written from `public/sw.js` with the list of the build's
//!   files, so the page works offline after one visit and a new build replaces it whole;
//! - `worker_loader.js` learns each worker's wasm size (the page shows "x of y MB" while it
//!   loads, even where the host compresses and the download's length is not the file's);
//! - `.gz` and `.br` are written beside each large file for hosts that serve precompressed files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{fail, Ctx, Error, Result};

/// Where `index.html` carries the build id (`unsealed` until a build is sealed), and
/// `worker_loader.js` the workers' wasm sizes.
const BUILD_AT: &str = r#"<meta name="spherewalk-build" content=""#;
const SIZES_AT: &str = "const WASM_SIZES = ";
/// What the template `public/sw.js` carries until a build is sealed.
const BUILD_SLOT: &str = "__SPHEREWALK_BUILD__";
const FILES_SLOT: &str = r#"["__SPHEREWALK_FILES__"]"#;
/// Files at least this large get `.gz` and `.br` copies.
const COMPRESS_FROM: u64 = 1024;
const COMPRESSED: &[&str] = &["html", "js", "css", "wasm", "txt", "json", "svg"];

impl Ctx {
    pub(crate) fn dist(&self, args: &[String]) -> Result {
        if let Some(a) = args.first() {
            return fail(format!("dist: unknown argument `{a}`"));
        }
        self.setup_build()?;
        let note = self.build_dist()?;
        println!("xtask: dist/ is ready to upload to any static host, at any path ({note})");
        Ok(())
    }

    /// Builds and seals dist/; returns a note with the build id and what a first visit loads.
    pub(crate) fn build_dist(&self) -> Result<String> {
        let mut c = self.cmd("trunk");
        c.args(["build", "--release", "--offline"]);
        self.run("trunk build", c)?;
        let dist = self.root.join("dist");
        let sealed = seal(&dist, &self.root.join("public").join("sw.js"), true)?;
        let wasm: Vec<String> = sealed
            .files
            .iter()
            .filter(|f| f.ends_with(".wasm"))
            .map(|f| {
                let size = fs::metadata(dist.join(f)).map(|m| m.len()).unwrap_or(0);
                let gz = fs::metadata(dist.join(format!("{f}.gz"))).map(|m| m.len()).unwrap_or(0);
                format!("{f}: {} KiB, {} KiB gzipped", size / 1024, gz / 1024)
            })
            .collect();
        Ok(format!("build {}; {}", sealed.build, wasm.join("; ")))
    }
}

/// What [`seal`] made of a folder.
pub struct Sealed {
    pub build: String,
    /// The build's files, relative to the folder, `/`-separated and sorted (sw.js and the
    /// compressed copies are not among them).
    pub files: Vec<String>,
}

/// Makes `dir` (Trunk's output, or a copy of it) one sealed build; `template` is `public/sw.js`;
/// `compress`: with the `.gz` and `.br` copies (brotli's best quality takes a while).
/// Sealing a sealed folder again gives the same build id unless a file changed.
pub fn seal(dir: &Path, template: &Path, compress: bool) -> Result<Sealed> {
    // What an earlier seal wrote is made again from the files.
    for f in walk(dir)? {
        if f == "sw.js" || f.ends_with(".gz") || f.ends_with(".br") {
            fs::remove_file(dir.join(&f))?;
        }
    }
    let files = walk(dir)?;
    if !files.iter().any(|f| f == "index.html") {
        return fail(format!("{} has no index.html: is it a Trunk build?", dir.display()));
    }

    // Each worker's wasm size, for the loader's "x of y MB" (the page's own wasm is named by
    // its hash and loads through Trunk's script).
    let sizes: Vec<String> = files
        .iter()
        .filter(|f| f.ends_with("_bg.wasm") && !f.contains('/') && !f.contains('-'))
        .map(|f| Ok(format!("\"{f}\": {}", fs::metadata(dir.join(f))?.len())))
        .collect::<Result<_>>()?;
    let loader = dir.join("worker_loader.js");
    fs::write(&loader, fill(&read_text(&loader)?, SIZES_AT, ";", &format!("{{{}}}", sizes.join(", ")), &loader)?)?;

    // The id is a hash of the files as Trunk made them: index.html's own id left out.
    let index = dir.join("index.html");
    let html = fill(&read_text(&index)?, BUILD_AT, "\"", "unsealed", &index)?;
    fs::write(&index, &html)?;
    let build = hash_files(dir, &files)?;
    fs::write(&index, fill(&html, BUILD_AT, "\"", &build, &index)?)?;

    let sw = read_text(template)?;
    if !sw.contains(BUILD_SLOT) || !sw.contains(FILES_SLOT) {
        return fail(format!("{} lacks {BUILD_SLOT} or {FILES_SLOT}", template.display()));
    }
    let list = format!("[{}]", files.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(", "));
    fs::write(dir.join("sw.js"), sw.replace(BUILD_SLOT, &build).replace(FILES_SLOT, &list))?;

    for f in files.iter().filter(|_| compress) {
        let path = dir.join(f);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if COMPRESSED.contains(&ext) && fs::metadata(&path)?.len() >= COMPRESS_FROM {
            precompress(&path)?;
        }
    }
    Ok(Sealed { build, files })
}

/// `path.gz` (gzip -9) and `path.br` (brotli, quality 11) beside `path`.
fn precompress(path: &Path) -> Result {
    let data = fs::read(path)?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&data)?;
    fs::write(with_suffix(path, "gz"), gz.finish()?)?;
    let mut br = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 22, ..Default::default() };
    brotli::BrotliCompress(&mut &data[..], &mut br, &params)?;
    fs::write(with_suffix(path, "br"), br)?;
    Ok(())
}

/// `text` with what stands between `at` and the next `end` replaced by `value`.
fn fill(text: &str, at: &str, end: &str, value: &str, path: &Path) -> Result<String> {
    let start = text.find(at).map(|i| i + at.len());
    let stop = start.and_then(|s| text[s..].find(end).map(|i| s + i));
    match (start, stop) {
        (Some(s), Some(e)) => Ok(format!("{}{value}{}", &text[..s], &text[e..])),
        _ => fail(format!("{} has no `{at}...{end}` to fill", path.display())),
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Error(format!("{}: {e}", path.display())))
}

/// Every file under `dir`, relative, `/`-separated, sorted.
pub fn walk(dir: &Path) -> Result<Vec<String>> {
    fn go(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result {
        for entry in fs::read_dir(dir).map_err(|e| Error(format!("{}: {e}", dir.display())))? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            if entry.file_type()?.is_dir() {
                go(&entry.path(), &rel, out)?;
            } else {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(dir, "", &mut out)?;
    out.sort();
    Ok(out)
}

/// The build id: FNV-1a (64 bits) over every file's path and bytes. It only has to change when
/// a file does, so a plain hash does.
fn hash_files(dir: &Path, files: &[String]) -> Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in files {
        eat(f.as_bytes());
        eat(&[0]);
        eat(&fs::read(dir.join(f))?);
        eat(&[0]);
    }
    Ok(format!("{h:016x}"))
}

/// Copies the folder `from` to `to` (made anew).
pub fn copy_tree(from: &Path, to: &Path) -> Result {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    for f in walk(from)? {
        let dest = to.join(&f);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(from.join(&f), dest)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-seal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("data")).unwrap();
        fs::write(dir.join("index.html"), r#"<head><meta name="spherewalk-build" content="unsealed" /></head>"#)
            .unwrap();
        fs::write(dir.join("worker_loader.js"), "const WASM_SIZES = {};\n").unwrap();
        fs::write(dir.join("worker_bg.wasm"), vec![7u8; 3000]).unwrap();
        fs::write(dir.join("app-0123_bg.wasm"), vec![1u8; 10]).unwrap();
        fs::write(dir.join("data").join("text.txt"), "x".repeat(5000)).unwrap();
        dir
    }

    fn template() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("public").join("sw.js")
    }

    #[test]
    fn a_sealed_build_lists_its_files_names_itself_and_compresses_what_is_large() {
        let dir = folder("a");
        let sealed = seal(&dir, &template(), true).unwrap();
        assert_eq!(
            sealed.files,
            ["app-0123_bg.wasm", "data/text.txt", "index.html", "worker_bg.wasm", "worker_loader.js"]
        );
        assert_eq!(sealed.build.len(), 16);
        let html = fs::read_to_string(dir.join("index.html")).unwrap();
        assert!(html.contains(&format!(r#"content="{}""#, sealed.build)), "{html}");
        let sw = fs::read_to_string(dir.join("sw.js")).unwrap();
        assert!(sw.contains(&sealed.build) && sw.contains(r#""data/text.txt""#), "{sw}");
        assert!(!sw.contains("__SPHEREWALK"), "every slot filled");
        // Only the workers' wasm has its size told (the page's own is named by its hash).
        let loader = fs::read_to_string(dir.join("worker_loader.js")).unwrap();
        assert_eq!(loader, "const WASM_SIZES = {\"worker_bg.wasm\": 3000};\n");
        // Large files get both copies, and they decompress to the file.
        let gz = fs::read(dir.join("data/text.txt.gz")).unwrap();
        let mut back = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut back).unwrap();
        assert_eq!(back, "x".repeat(5000));
        let br = fs::read(dir.join("worker_bg.wasm.br")).unwrap();
        let mut back = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut back).unwrap();
        assert_eq!(back, vec![7u8; 3000]);
        assert!(!dir.join("app-0123_bg.wasm.gz").exists(), "10 bytes are not worth compressing");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The Pages workflow cannot run here: what it runs is checked instead. It builds with the
    /// command the tests build with, and its tool cache is keyed by the versions xtask pins.
    #[test]
    fn the_pages_workflow_builds_with_cargo_xtask_dist_and_publishes_dist() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows/pages.yml");
        let yml = fs::read_to_string(&path).unwrap();
        let runs: Vec<&str> = yml.lines().filter_map(|l| l.trim().strip_prefix("run: ")).collect();
        let builds: Vec<&&str> = runs.iter().filter(|r| r.contains("cargo") || r.contains("trunk")).collect();
        assert_eq!(builds, [&"cargo xtask dist"], "the workflow's only build step: {runs:?}");
        for line in ["actions/upload-pages-artifact@", "path: dist", "actions/deploy-pages@", "branches: [main]"] {
            assert!(yml.contains(line), "{line} in {}", path.display());
        }
        let key = format!("trunk-{}-wasm-bindgen-{}", crate::TRUNK_VERSION, crate::WASM_BINDGEN_VERSION);
        assert!(yml.contains(&key), "the tool cache's key names the pinned versions: {key}");
        let rust = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml")).unwrap();
        let version = rust.lines().find_map(|l| l.strip_prefix("rust-version = ")).unwrap().trim_matches('"');
        assert!(yml.contains(&format!("rustup toolchain install {version}")), "Rust {version}, as the workspace");
    }

    #[test]
    fn sealing_again_keeps_the_id_and_a_changed_file_makes_a_new_build() {
        let dir = folder("b");
        let first = seal(&dir, &template(), true).unwrap();
        let again = seal(&dir, &template(), true).unwrap();
        assert_eq!(first.build, again.build);
        assert_eq!(first.files, again.files, "the compressed copies and sw.js are not files of the build");
        fs::write(dir.join("data").join("text.txt"), "y".repeat(5000)).unwrap();
        let changed = seal(&dir, &template(), true).unwrap();
        assert_ne!(changed.build, first.build);
        assert!(fs::read_to_string(dir.join("sw.js")).unwrap().contains(&changed.build));
        fs::remove_dir_all(&dir).unwrap();
    }
}
