//! Dates as the tools print them: glibc's `strftime("%F %T")` and
//! `ctime()`, always in UTC (what they print with `TZ` unset on a UTC
//! system, as for the kernel fixtures).

/// A broken-down UTC time (what `gmtime()` fills in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CivilTime {
    /// Proleptic Gregorian year (astronomical: year 0 exists, -1 before it).
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
    /// 0..=23.
    pub hour: u32,
    /// 0..=59.
    pub minute: u32,
    /// 0..=59.
    pub second: u32,
    /// 0 = Sunday .. 6 = Saturday.
    pub weekday: u32,
}

/// Days since 1970-01-01 of the given proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Count years from March so that the leap day is the last day of a year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400; // 0..=399
    let month_from_march = (i64::from(month) + 9) % 12; // Mar = 0 .. Feb = 11
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01, the start of a 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097; // 0..=146096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // 0..=11
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = (if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    }) as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Break a `time_t` down in UTC. Defined for every `i64`.
pub fn civil_from_unix(t: i64) -> CivilTime {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    CivilTime {
        year,
        month,
        day,
        hour: secs / 3600,
        minute: secs / 60 % 60,
        second: secs % 60,
        // 1970-01-01 was a Thursday.
        weekday: (days + 4).rem_euclid(7) as u32,
    }
}

/// glibc's `localtime_r` fails (EOVERFLOW) unless `tm_year = year - 1900`
/// fits in an `int`.
fn glibc_tm(t: i64) -> Option<CivilTime> {
    let c = civil_from_unix(t);
    i32::try_from(c.year - 1900).ok().map(|_| c)
}

/// What the tools print through `strftime(buf, .., "%F %T", localtime(t))`
/// for an on-disk time `t` (cast to `time_t`, so values of 2^63 and above
/// are negative times), in UTC. glibc prints `%Y` as `tm_year + 1900` in
/// `int` arithmetic, without zero padding ("1-01-01", "10000-01-01").
///
/// Where glibc's `localtime_r` fails (|year| beyond about 2^31) the tools
/// format an uninitialised `struct tm`; this prints `????-??-?? ??:??:??`.
pub fn format_date_time(t: u64) -> String {
    let t = t as i64;
    match glibc_tm(t) {
        Some(c) => {
            let year = ((c.year - 1900) as i32).wrapping_add(1900);
            format!(
                "{}-{:02}-{:02} {:02}:{:02}:{:02}",
                year, c.month, c.day, c.hour, c.minute, c.second
            )
        }
        None => "????-??-?? ??:??:??".to_string(),
    }
}

const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// glibc `ctime(&t)` in UTC, trailing newline included:
/// `"Sun Nov 29 18:57:34 2026\n"` (day of month space-padded to 2).
/// Where glibc returns NULL (the year does not fit an `int`), nilfs-tune's
/// `printf("%s", NULL)` prints `(null)` with no newline; so does this.
pub fn format_ctime(t: u64) -> String {
    let t = t as i64;
    match glibc_tm(t) {
        Some(c) if c.year <= i64::from(i32::MAX) => format!(
            "{} {}{:3} {:02}:{:02}:{:02} {}\n",
            WEEKDAYS[c.weekday as usize],
            MONTHS[(c.month - 1) as usize],
            c.day,
            c.hour,
            c.minute,
            c.second,
            c.year
        ),
        _ => "(null)".to_string(),
    }
}

/// The DATE/TIME column of lssu: `format_date_time`, except that a `lastmod`
/// of exactly 0 prints as `---------- --:--:--`.
pub fn format_lastmod(lastmod: u64) -> String {
    if lastmod == 0 {
        "---------- --:--:--".to_string()
    } else {
        format_date_time(lastmod)
    }
}
