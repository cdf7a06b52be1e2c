//! What `lab` prints, without the panic Rust's own `println!` ends in when the output cannot be
//! written: a reader that went away (`lab ... --json | head -c 10`) ends the command quietly, as
//! the Unix tools do; a full disk (`> /dev/full`) ends it with the reason.

use std::fmt;
use std::io::{self, Write};

/// Prints `args` (and a newline with `newline`), or ends the command as above.
pub fn print(args: fmt::Arguments, newline: bool) {
    let mut out = io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    if let Err(e) = written.and_then(|()| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: the output could not be written: {e}");
        std::process::exit(1);
    }
}
