//! Gap formatting for notes; timestamps are parsed by [`condense_model::time`].

pub use condense_model::time::parse_rfc3339_ms;

/// A gap for notes: `95 min`, `2 min 30 s`, `0 s`.
pub fn format_gap(ms: i64) -> String {
    let secs = ms.max(0) / 1_000;
    let (minutes, seconds) = (secs / 60, secs % 60);
    match (minutes, seconds) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_read_naturally() {
        assert_eq!(format_gap(0), "0 s");
        assert_eq!(format_gap(-5), "0 s");
        assert_eq!(format_gap(42_999), "42 s");
        assert_eq!(format_gap(95 * 60_000), "95 min");
        assert_eq!(format_gap(150_000), "2 min 30 s");
    }
}
