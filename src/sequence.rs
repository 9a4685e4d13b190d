//! Frame sequences: file-name patterns and frame ranges, in the syntaxes farms and compositors
//! already use, so a farm task can hand `deepmerge` the same strings it hands oiiotool or Nuke.
//!
//! - [`FramePattern`]: a path with one frame token: `####` (one `#` per digit, `@` for one digit,
//!   mixed runs count every character), printf `%04d` / `%d`, or Houdini `$F4` / `$F`. A frame is
//!   formatted as printf's `%0Nd` formats it: `-5` in four digits is `-005`.
//! - [`parse_frames`]: oiiotool/Nuke/fileseq range syntax, comma-separated items `N`, `A-B`,
//!   `A-BxS` (every S-th frame from A), negative frames (`-5--1`, `-3-2`), descending ranges
//!   (`10-1`); a frame listed twice is kept once, at its first place (as fileseq's `FrameSet`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A path holding one frame token, e.g. `beauty.####.exr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FramePattern {
    /// Text before the token.
    head: String,
    /// Text after the token.
    tail: String,
    /// Minimum digits (zero padded); 0 for no padding (`%d`, `$F`).
    width: usize,
}

impl FramePattern {
    /// The pattern in `path`, `None` when it has no frame token; an error when it has more
    /// than one (which frame each stands for would be a guess).
    pub fn parse(path: &Path) -> Result<Option<FramePattern>> {
        let text = path.to_string_lossy();
        let tokens = find_tokens(&text);
        match tokens.as_slice() {
            [] => Ok(None),
            [(start, end, width)] => Ok(Some(FramePattern {
                head: text[..*start].to_string(),
                tail: text[*end..].to_string(),
                width: *width,
            })),
            _ => Err(Error::Usage(format!(
                "{}: more than one frame token (####, %04d, $F4) in one path",
                path.display()
            ))),
        }
    }

    /// The path of `frame`.
    pub fn path(&self, frame: i64) -> PathBuf {
        PathBuf::from(format!(
            "{}{:0width$}{}",
            self.head,
            frame,
            self.tail,
            width = self.width
        ))
    }
}

/// Every frame token in `text` as (start, end, width).
fn find_tokens(text: &str) -> Vec<(usize, usize, usize)> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let digits_at = |from: usize| {
        let n = bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        (n, text[from..from + n].parse::<usize>().unwrap_or(0))
    };
    while i < bytes.len() {
        match bytes[i] {
            b'#' | b'@' => {
                let n = bytes[i..]
                    .iter()
                    .take_while(|&&b| b == b'#' || b == b'@')
                    .count();
                tokens.push((i, i + n, n));
                i += n;
            }
            // %d, %4d, %04d
            b'%' => {
                let (n, width) = digits_at(i + 1);
                if bytes.get(i + 1 + n) == Some(&b'd') {
                    tokens.push((i, i + n + 2, width));
                    i += n + 2;
                } else {
                    i += 1;
                }
            }
            // $F, $F4 (but not $FOO: a variable that only starts with F)
            b'$' if bytes.get(i + 1) == Some(&b'F') => {
                let (n, width) = digits_at(i + 2);
                let next = bytes.get(i + 2 + n);
                if next.is_none_or(|b| !(b.is_ascii_alphabetic() || *b == b'_')) {
                    tokens.push((i, i + 2 + n, width));
                    i += n + 2;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    tokens
}

/// The frames of a range expression such as `1-100`, `1-100x4`, `1-10,20,30-40` or `-5--1`,
/// in order, each once.
pub fn parse_frames(expr: &str) -> Result<Vec<i64>> {
    let bad = |why: &str| Error::Usage(format!("--frames {expr:?}: {why}"));
    let mut frames = Vec::new();
    let mut seen = std::collections::HashSet::new();
    if expr.trim().is_empty() {
        return Err(bad("no frames"));
    }
    for item in expr.split(',') {
        let item = item.trim();
        let not_a_range = || bad(&format!("{item:?} is not a frame or range"));
        let (range, step) = match item.split_once('x') {
            // A step only after a whole range: `x` or `3-x` is no range, not a bad step.
            Some((r, _)) if r.is_empty() || r.ends_with('-') => return Err(not_a_range()),
            Some((r, s)) => {
                let step: i64 = s
                    .parse()
                    .map_err(|_| bad(&format!("{s:?} after x is not a step")))?;
                if step <= 0 {
                    return Err(bad("the step after x must be positive"));
                }
                (r, step)
            }
            None => (item, 1),
        };
        let (first, rest) = leading_int(range).ok_or_else(not_a_range)?;
        let last = match rest {
            "" => first,
            _ => match rest.strip_prefix('-').and_then(leading_int) {
                Some((last, "")) => last,
                _ => return Err(not_a_range()),
            },
        };
        if rest.is_empty() && step != 1 {
            return Err(bad(&format!("{item:?}: a step needs a range")));
        }
        let count = (last - first).unsigned_abs() / step as u64 + 1;
        if count > 10_000_000 {
            return Err(bad("more than ten million frames"));
        }
        let dir = if last >= first { step } else { -step };
        for k in 0..count as i64 {
            let frame = first + k * dir;
            if seen.insert(frame) {
                frames.push(frame);
            }
        }
    }
    Ok(frames)
}

/// A signed integer at the start of `s` and what follows it.
fn leading_int(s: &str) -> Option<(i64, &str)> {
    let sign = usize::from(s.starts_with('-'));
    let digits = s[sign..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let end = sign + digits;
    Some((s[..end].parse().ok()?, &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(p: &str) -> FramePattern {
        FramePattern::parse(Path::new(p)).unwrap().unwrap()
    }

    #[test]
    fn every_token_syntax_formats_frames() {
        assert_eq!(pattern("a.####.exr").path(7), Path::new("a.0007.exr"));
        assert_eq!(pattern("a.@@@.exr").path(7), Path::new("a.007.exr"));
        assert_eq!(pattern("a.#.exr").path(1234), Path::new("a.1234.exr"));
        assert_eq!(pattern("a.%04d.exr").path(7), Path::new("a.0007.exr"));
        assert_eq!(pattern("a.%d.exr").path(7), Path::new("a.7.exr"));
        assert_eq!(pattern("a.$F4.exr").path(7), Path::new("a.0007.exr"));
        assert_eq!(pattern("a.$F.exr").path(7), Path::new("a.7.exr"));
        assert_eq!(pattern("dir/a_$F3").path(12), Path::new("dir/a_012"));
        // printf's rule for negative frames: the sign counts in the width.
        assert_eq!(pattern("a.####.exr").path(-5), Path::new("a.-005.exr"));
    }

    #[test]
    fn paths_without_a_token_or_with_two() {
        for plain in ["a.exr", "100%.exr", "$FOO/a.exr", "a.%s.exr"] {
            assert_eq!(
                FramePattern::parse(Path::new(plain)).unwrap(),
                None,
                "{plain}"
            );
        }
        assert!(FramePattern::parse(Path::new("a.####.%04d.exr")).is_err());
        assert!(FramePattern::parse(Path::new("$F/a.#.exr")).is_err());
    }

    #[test]
    fn ranges_steps_lists_and_negative_frames() {
        assert_eq!(parse_frames("1-5").unwrap(), vec![1, 2, 3, 4, 5]);
        assert_eq!(parse_frames("1-10x4").unwrap(), vec![1, 5, 9]);
        assert_eq!(parse_frames("1-3,7,9-10").unwrap(), vec![1, 2, 3, 7, 9, 10]);
        assert_eq!(parse_frames("-5--3").unwrap(), vec![-5, -4, -3]);
        assert_eq!(parse_frames("-2-1").unwrap(), vec![-2, -1, 0, 1]);
        assert_eq!(parse_frames("3-1").unwrap(), vec![3, 2, 1]);
        assert_eq!(parse_frames("42").unwrap(), vec![42]);
        assert_eq!(parse_frames("1-3,2-4").unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn malformed_ranges_are_usage_errors() {
        for bad in [
            "", "a", "1-", "-", "1-5x0", "1-5x-2", "1x2", "1--", "1-5y", "1,,2",
        ] {
            assert!(
                matches!(parse_frames(bad), Err(Error::Usage(_))),
                "{bad:?} should be refused"
            );
        }
        // What each refusal names: no range at all is not a bad step.
        for (bad, says) in [
            ("x", "\"x\" is not a frame or range"),
            ("3-x", "\"3-x\" is not a frame or range"),
            ("1-10xz", "\"z\" after x is not a step"),
            ("1-10x", "\"\" after x is not a step"),
        ] {
            let message = parse_frames(bad).unwrap_err().to_string();
            assert!(message.ends_with(says), "{bad:?}: {message}");
        }
    }
}
