//! Byte sizes as people read them: one formatter for every message and table that prints a
//! size, so a budget, a buffer and a file are all written the same way.

/// Bytes as GiB with two decimals, or MiB below a tenth of a GiB, KiB below a MiB and bytes
/// below a KiB, so that a small size never reads "0.0". Sizes are computed with saturating
/// arithmetic, so `u64::MAX` stands for "too large to count".
pub fn human_bytes(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "more than 16 EiB".into();
    }
    let gib = bytes as f64 / (1u64 << 30) as f64;
    if gib >= 0.1 {
        format!("{gib:.2} GiB")
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / (1u64 << 10) as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// A memory size as the CLI and Python take it: a number of GiB (`2`, `0.5`), or a number with
/// a unit: `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (binary units, any case, a space
/// allowed: `512MiB`, `1.5 G`). Zero, negative, non-finite or unparsable sizes are refused
/// with what was given; the caller names its option.
pub fn parse_memory(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = (text[..split].trim(), text[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "g" | "gib" | "gb" => 1 << 30,
        "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "t" | "tib" | "tb" => 1 << 40,
        _ => {
            return Err(format!(
                "a memory size is a number of GiB or a number with a unit (B, KiB, MiB, GiB, \
                 TiB), not {text:?}"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("a memory size is a positive number, not {text:?}"))?;
    let bytes = value * scale as f64;
    if !(bytes.is_finite() && bytes >= 1.0) {
        return Err(format!(
            "a memory size must be positive (at least one byte), not {text:?}"
        ));
    }
    // Sizes past u64 saturate: "more than there is" is still a valid (unlimited) budget.
    Ok(if bytes >= u64::MAX as f64 {
        u64::MAX
    } else {
        bytes as u64
    })
}

/// A size as the `DEEPMERGE_*` measurement settings take it: a plain number is bytes (unlike
/// [`parse_memory`], whose plain numbers are GiB, as `--memory-budget` takes them), a number
/// with a unit a size as [`parse_memory`] reads it. The caller names its setting and bounds.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    match text.parse::<u64>() {
        Ok(bytes) => Ok(bytes),
        // Its own wording: `parse_memory`'s would call a plain number GiB.
        Err(_) => parse_memory(text).map_err(|_| format!("not a size: {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_in_gib_or_with_a_unit() {
        assert_eq!(parse_memory("2"), Ok(2 << 30));
        assert_eq!(parse_memory("0.5"), Ok(1 << 29));
        assert_eq!(parse_memory("512MiB"), Ok(512 << 20));
        assert_eq!(parse_memory("1.5 g"), Ok(3 << 29));
        assert_eq!(parse_memory("4096 B"), Ok(4096));
        assert_eq!(parse_memory("64k"), Ok(64 << 10));
        for bad in ["0", "-1", "nan", "inf", "", "2 lightyears", "0.1 B"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn byte_sizes_are_plain_bytes_or_sizes_with_a_unit() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes(" 4096 "), Ok(4096));
        assert_eq!(parse_bytes("16M"), Ok(16 << 20));
        assert_eq!(parse_bytes("lots").unwrap_err(), "not a size: \"lots\"");
        for bad in ["", "-1", "lots", "2 lightyears"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn small_sizes_never_read_zero() {
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_bytes(107_374), "104.9 KiB");
        assert_eq!(human_bytes(5 << 20), "5.0 MiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
    }
}
