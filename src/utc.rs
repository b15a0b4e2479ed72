//! Times as the tool writes them: UTC, `YYYY-MM-DD hh:mm:ss` (worker logs, standing records,
//! bench documents, reports, session locks).
//!
//! Invariant: the civil date is computed for the proleptic Gregorian calendar without a time-zone
//! database, so every machine writes the same text for the same instant.

/// The time now.
pub fn now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    at(t)
}

/// A time in seconds since the Unix epoch.
pub fn at(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86400), t.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::at;

    #[test]
    fn instants_are_written_as_utc_civil_times() {
        assert_eq!(at(0), "1970-01-01 00:00:00");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(at(1_798_761_599), "2026-12-31 23:59:59");
        assert_eq!(at(-1), "1969-12-31 23:59:59");
    }
}
