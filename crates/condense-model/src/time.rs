//! RFC 3339 timestamps (what transcripts carry) to Unix milliseconds, without a date crate.
//! The binary's `--now` and the stages that read message times use this one parser.
//!
//! Accepted: `YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM]`, with `t`, `T` or a space between date
//! and time and `z` or `Z` for UTC (`2025-09-03T01:02:03.665Z`, `2025-09-03 03:02:03+02:00`).
//! Fractions beyond milliseconds are truncated; a leap second (`:60`) counts as `:59`.
//!
//! A timestamp without a zone is read as UTC: OpenHands writes `2025-04-30T16:34:22.948624`
//! (Python's `datetime.isoformat()` of a UTC time), and UTC is the only reading that does not
//! depend on the machine condense runs on.
//!
//! ```
//! use condense_model::time::parse_rfc3339_ms;
//! assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1_500));
//! assert_eq!(parse_rfc3339_ms("1970-01-01T02:00:01.5+02:00"), Some(1_500));
//! assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.500123"), Some(1_500)); // no zone: UTC
//! assert_eq!(parse_rfc3339_ms("1970-01-01"), None);
//! ```

/// Unix milliseconds of an RFC 3339 timestamp (or one without a zone, read as UTC), `None`
/// when it is not one.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let b = text.trim().as_bytes();
    if b.len() < 19 {
        return None;
    }
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?.min(59);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        for _ in n..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(i) {
        // No zone: UTC (see the module docs).
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (h, m) = (digits(b, i + 1, 2)?, digits(b, i + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let total = h * 60 + m;
            if *sign == b'-' {
                -total
            } else {
                total
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1_000 + millis)
}

/// The decimal number in `b[at..at + len]`, all digits.
fn digits(b: &[u8], at: usize, len: usize) -> Option<i64> {
    let slice = b.get(at..at + len)?;
    slice.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_claude_code_timestamps() {
        // 2025-09-03T01:02:03.665Z, checked with `date -d ... +%s%3N`.
        assert_eq!(
            parse_rfc3339_ms("2025-09-03T01:02:03.665Z"),
            Some(1_756_861_323_665)
        );
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_ms("1969-12-31T23:59:59Z"), Some(-1_000));
        assert_eq!(
            parse_rfc3339_ms("2000-02-29T00:00:00Z"),
            Some(951_782_400_000)
        );
    }

    #[test]
    fn offsets_fractions_and_separators() {
        let utc = parse_rfc3339_ms("2025-09-03T01:02:03Z");
        assert_eq!(parse_rfc3339_ms("2025-09-03T03:02:03+02:00"), utc);
        assert_eq!(parse_rfc3339_ms("2025-09-02T23:32:03-01:30"), utc);
        assert_eq!(parse_rfc3339_ms("2025-09-03 01:02:03z"), utc);
        let base = utc.unwrap_or_default();
        assert_eq!(parse_rfc3339_ms("2025-09-03T01:02:03.5Z"), Some(base + 500));
        assert_eq!(
            parse_rfc3339_ms("2025-09-03T01:02:03.123456789Z"),
            Some(base + 123)
        );
    }

    #[test]
    fn no_zone_is_utc() {
        // OpenHands: microseconds, no zone. 2025-04-30T16:34:22.948Z by `date -u -d ... +%s%3N`.
        assert_eq!(
            parse_rfc3339_ms("2025-04-30T16:34:22.948624"),
            Some(1_746_030_862_948)
        );
        assert_eq!(
            parse_rfc3339_ms("2025-04-30T16:34:22.948624"),
            parse_rfc3339_ms("2025-04-30T16:34:22.948Z")
        );
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_rfc3339_ms("1970-01-01 00:00:01"), Some(1_000));
        assert_eq!(
            parse_rfc3339_ms("  2000-02-29t00:00:00.25\n"),
            Some(951_782_400_250)
        );
        // The rest of the checks still apply without a zone.
        assert_eq!(parse_rfc3339_ms("2025-02-29T01:02:03"), None);
        assert_eq!(parse_rfc3339_ms("2025-09-03T24:02:03"), None);
    }

    #[test]
    fn rejects_what_is_not_rfc3339() {
        for bad in [
            "",
            "2025-09-03",
            "2025-09-03T01:02",
            "2025-09-03T01:02:03.",
            "2025-09-03T01:02:03 Z",
            "2025-09-03T01:02:03.123junk",
            "2025-13-03T01:02:03Z",
            "2025-02-29T01:02:03Z",
            "2025-09-03T24:02:03Z",
            "2025-09-03T01:02:03.Z",
            "2025-09-03T01:02:03+0200",
            "2025/09/03T01:02:03Z",
            "2025-09-03T01:02:03Zjunk",
            "１０25-09-03T01:02:03Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }
}
