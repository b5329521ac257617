//! A listing printed as its pages arrive: a table (a header, a row per item, a count) or one
//! JSON array, so that a store of millions is never held whole by kbngctl either.

use std::io::Write;

use serde_json::Value;

use crate::client::Output;

pub struct Listing<'a> {
    out: std::io::StdoutLock<'a>,
    output: Output,
    n: u64,
}

impl Listing<'_> {
    /// Starts the listing; `header` heads a table.
    pub fn start(output: Output, header: &str) -> std::io::Result<Self> {
        let mut out = std::io::stdout().lock();
        match output {
            Output::Table => writeln!(out, "{header}")?,
            Output::Json => write!(out, "[")?,
        }
        Ok(Listing { out, output, n: 0 })
    }

    /// One item: `row` is its table line.
    pub fn item(&mut self, v: &Value, row: impl FnOnce(&Value) -> String) -> std::io::Result<()> {
        match self.output {
            Output::Table => writeln!(self.out, "{}", row(v))?,
            Output::Json => {
                let sep = if self.n == 0 { "\n" } else { ",\n" };
                write!(self.out, "{sep}{v}")?;
            }
        }
        self.n += 1;
        Ok(())
    }

    /// Ends it; a table's last line counts the items as `N <noun>(s)`.
    pub fn finish(mut self, noun: &str) -> std::io::Result<()> {
        match self.output {
            Output::Table => writeln!(self.out, "{} {noun}(s)", self.n),
            Output::Json => writeln!(self.out, "\n]"),
        }
    }
}
