//! The house's rules, checked by `cargo xtask test`: a README a newcomer can read in one sitting,
//! no link to a file outside the repository (a fresh clone has only the repository), and no
//! source file too long to hold in one's head.

use std::fs;
use std::path::Path;

use crate::{fail, Result};

const README_LINES: usize = 200;
const FILE_LINES: usize = 600;
/// The folders whose files are held to [`FILE_LINES`].
const SOURCES: &[&str] = &["engine/src", "app/src", "xtask/src", "e2e"];
const SOURCE_EXTS: &[&str] = &["rs", "mjs", "js", "wgsl"];
/// Where links and references are looked for.
const DOCUMENTED: &[&str] = &["README.md", "docs", "engine/src", "app/src", "xtask/src", "e2e", "bench", "public"];
const TEXT_EXTS: &[&str] = &["md", "rs", "mjs", "js", "wgsl", "py", "sh", "html", "css"];
const SKIPPED: &[&str] = &["node_modules", "artifacts", "__pycache__"];

/// Every broken rule, or a note of what was checked.
fn check(root: &Path) -> Result<String> {
    let mut broken = Vec::new();
    let readme = fs::read_to_string(root.join("README.md"))?;
    let lines = readme.lines().count();
    if lines > README_LINES {
        broken.push(format!("README.md has {lines} lines (at most {README_LINES}: details go in docs/)"));
    }
    let mut files = 0;
    for dir in SOURCES {
        for f in sources(root, dir, SOURCE_EXTS)? {
            files += 1;
            let n = fs::read_to_string(root.join(&f))?.lines().count();
            if n > FILE_LINES {
                broken.push(format!("{f} has {n} lines (at most {FILE_LINES}: split it by concept)"));
            }
        }
    }
    for place in DOCUMENTED {
        let found = if root.join(place).is_dir() { sources(root, place, TEXT_EXTS)? } else { vec![place.to_string()] };
        for f in found {
            let text = fs::read_to_string(root.join(&f))?;
            for (i, line) in text.lines().enumerate() {
                if outside(line) {
                    broken.push(format!("{f}:{}: points outside the repository: {}", i + 1, line.trim()));
                }
            }
        }
    }
    if broken.is_empty() {
        Ok(format!("README {lines} lines, {files} source files of at most {FILE_LINES}"))
    } else {
        fail(broken.join("\n  "))
    }
}

/// The files under `root/dir` with one of `exts`, relative to `root`; installed packages and
/// test output left out.
fn sources(root: &Path, dir: &str, exts: &[&str]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root.join(dir))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{dir}/{name}");
        if entry.file_type()?.is_dir() {
            if !SKIPPED.contains(&name.as_str()) {
                out.extend(sources(root, &rel, exts)?);
            }
        } else if name.rsplit_once('.').is_some_and(|(_, ext)| exts.contains(&ext)) {
            out.push(rel);
        }
    }
    out.sort();
    Ok(out)
}

/// The team's shared folder and its science notes: not in the repository (written in two parts so
/// that this file does not name them itself).
const SHARED: &str = concat!("../", "shared");
const SHARED_SCIENCE: &str = concat!("SCIENCE", ".md");

/// Whether a line sends the reader to the team's shared folder, which is not in the repository.
fn outside(line: &str) -> bool {
    line.contains(SHARED) || line.contains(SHARED_SCIENCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_keeps_the_house_rules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        if let Err(e) = check(&root) {
            panic!("{e}");
        }
    }

    #[test]
    fn a_link_to_the_shared_folder_is_found() {
        assert!(outside(&format!("see [the formulas]({SHARED}/{SHARED_SCIENCE})")));
        assert!(outside(&format!("// {SHARED_SCIENCE} §5")));
        assert!(!outside("see [the formulas](docs/science.md)"));
    }
}
