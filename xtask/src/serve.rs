//! `cargo xtask serve`: builds dist/ (as `cargo xtask dist` does) and serves that same folder.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::thread;
use std::time::Duration;

use crate::{fail, Ctx, Error, Result, SERVE_PORT};

impl Ctx {
    pub(crate) fn serve(&self, args: &[String]) -> Result {
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
        self.setup_build()?;
        let note = self.build_dist()?;
        let listener = TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| Error(format!("cannot listen on 127.0.0.1:{port}: {e} (try --port N)")))?;
        println!("xtask: {note}");
        println!(
            "xtask: serving dist/ on http://127.0.0.1:{port}/ (the folder `cargo xtask dist` makes; Ctrl-C stops)"
        );
        serve_static(listener, self.root.join("dist"));
        Ok(())
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::env;

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
