//! The one reader of `DEEPMERGE_TIMELINE=1`'s span lines for the tests that check a timeline
//! (`stream`, `gpu_profile`, `gpu_auto`): the columns are start and length (ms), the thread's
//! CPU time meanwhile (ms), its minor page faults, the thread, and what it did. A change of
//! the format is made here once.
#![allow(dead_code)]

/// One span of a timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Milliseconds from the process's start.
    pub start: f64,
    /// Its length, in milliseconds.
    pub took: f64,
    /// Milliseconds its thread ran on a CPU meanwhile (`None`: `-`, a system without the clock).
    pub on_cpu: Option<f64>,
    /// Minor page faults its thread took meanwhile (`None`: `-`).
    pub faults: Option<u64>,
    /// The thread's name.
    pub thread: String,
    /// What it did.
    pub what: String,
}

/// The spans of the timeline in `stderr`, in the order printed (the lines after the timeline's
/// header, up to the threads' busy times); none where there is no timeline.
pub fn spans(stderr: &str) -> Vec<Span> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("timeline"))
        .skip(2)
        .filter(|l| !l.contains(": busy "))
        .filter_map(span)
        .collect()
}

/// One span line, or `None` for a line that is not one.
fn span(line: &str) -> Option<Span> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.len() < 6 {
        return None;
    }
    Some(Span {
        start: words[0].parse().ok()?,
        took: words[1].parse().ok()?,
        on_cpu: words[2].parse().ok(),
        faults: words[3].parse().ok(),
        thread: words[4].to_string(),
        what: words[5..].join(" "),
    })
}
