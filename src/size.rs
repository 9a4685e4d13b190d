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
