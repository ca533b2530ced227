//! Gap formatting for notes; timestamps are parsed by [`condense_model::time`].

pub use condense_model::time::parse_rfc3339_ms;

/// A gap for notes, in its two largest units, the second rounded: `455 d 17 h`, `1 h 35 min`,
/// `2 min 30 s`, `0 s` (a zero second unit is left out: `2 h`).
pub fn format_gap(ms: i64) -> String {
    let secs = ms.max(0) / 1_000;
    let Some(first) = UNITS.iter().position(|(size, _)| secs >= *size) else {
        return "0 s".to_string();
    };
    // Round to the second unit shown; the result may carry into a larger first unit.
    let step = UNITS.get(first + 1).map_or(1, |(size, _)| *size);
    two_units((secs + step / 2) / step * step)
}

/// Units of [`format_gap`], largest first, in seconds.
const UNITS: [(i64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "min"), (1, "s")];

/// `secs` in its two largest units, the second truncated.
fn two_units(secs: i64) -> String {
    let first = UNITS
        .iter()
        .position(|(size, _)| secs >= *size)
        .unwrap_or(UNITS.len() - 1);
    let (size, unit) = UNITS[first];
    let mut out = format!("{} {unit}", secs / size);
    if let Some((next_size, next_unit)) = UNITS.get(first + 1) {
        let rest = secs % size / next_size;
        if rest > 0 {
            out.push_str(&format!(" {rest} {next_unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_read_naturally() {
        assert_eq!(format_gap(0), "0 s");
        assert_eq!(format_gap(-5), "0 s");
        assert_eq!(format_gap(42_999), "42 s");
        assert_eq!(format_gap(95 * 60_000), "1 h 35 min");
        assert_eq!(format_gap(150_000), "2 min 30 s");
        assert_eq!(format_gap(45 * 60_000), "45 min");
        assert_eq!(format_gap(2 * 3_600_000 + 29_000), "2 h");
        assert_eq!(format_gap(2 * 3_600_000 + 31_000), "2 h 1 min");
        assert_eq!(format_gap((23 * 3_600 + 59 * 60 + 40) * 1_000), "1 d");
        // The issue's `656215 min 50 s`.
        assert_eq!(format_gap((656_215 * 60 + 50) * 1_000), "455 d 17 h");
    }
}
