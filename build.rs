//! Build-time facts the binary reports: `DEEPMERGE_FEATURES`, the package's Cargo features
//! enabled in this build (comma-separated, "none" when there are none), for `--version`.

fn main() {
    let mut features: Vec<String> = std::env::vars()
        .filter_map(|(name, _)| name.strip_prefix("CARGO_FEATURE_").map(str::to_owned))
        .filter(|name| name != "DEFAULT")
        .map(|name| name.to_lowercase().replace('_', "-"))
        .collect();
    features.sort();
    let list = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    println!("cargo:rustc-env=DEEPMERGE_FEATURES={list}");
    // Features are part of the build's fingerprint already; nothing else feeds this.
    println!("cargo:rerun-if-changed=build.rs");
}
