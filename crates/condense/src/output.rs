//! Writing to standard output: text and JSON, a closed pipe ending the run quietly.
//!
//! JSON reports round fractional numbers (milliseconds, shares) to 3 decimals: binary floats
//! sum to `0.13572700000000001`, which says nothing more than `0.136`.

use crate::term::is_broken_pipe;
use crate::Failure;
use serde::Serialize;
use std::io::Write;

/// Prints `text` on stdout; a closed stdout (`| head`) ends the run with exit 0.
pub fn print(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if is_broken_pipe(&e) => Err(Failure::closed_stdout()),
        Err(e) => Err(Failure::run(format!("<stdout>: cannot write: {e}"))),
    }
}

/// `value` as pretty JSON, fractional numbers rounded to 3 decimals.
pub fn json_text(value: &impl Serialize) -> Result<String, Failure> {
    let mut v = serde_json::to_value(value).map_err(|e| Failure::run(e.to_string()))?;
    round_floats(&mut v);
    serde_json::to_string_pretty(&v).map_err(|e| Failure::run(e.to_string()))
}

/// Prints `value` as pretty JSON (see [`json_text`]) and a newline.
pub fn print_json(value: &impl Serialize) -> Result<(), Failure> {
    print(&format!("{}\n", json_text(value)?))
}

/// Rounds every fractional number in `v` to 3 decimals.
fn round_floats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            if let Some(x) = n.as_f64() {
                let rounded = (x * 1000.0).round() / 1000.0;
                if let Some(r) = serde_json::Number::from_f64(rounded) {
                    *n = r;
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(round_floats),
        serde_json::Value::Object(map) => map.values_mut().for_each(round_floats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_rounded_integers_kept() {
        let v = serde_json::json!({"millis": 0.13572700000000001, "n": 12, "a": [2.0004, 1e300]});
        let text = json_text(&v).unwrap();
        assert!(text.contains("\"millis\": 0.136"), "{text}");
        assert!(
            text.contains("\"n\": 12") && text.contains("2.0,"),
            "{text}"
        );
    }
}
