//! Scene parameter files: `scenes/<name>.toml`, embedded in the binary with `include_str!` so an
//! installed `deepmerge` needs no data files.
//!
//! The files are TOML read by the `toml` crate, holding only numbers under (dotted) keys; the
//! nested tables are flattened back to dotted keys (`interior.columns`) for the builders. Every
//! key a builder expects must be present and every key present must be used, so a typo in a file
//! is an error rather than a silently ignored setting.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The embedded parameter files, by scene name.
pub const SCENE_FILES: [(&str, &str); 4] = [
    ("atrium", include_str!("../../scenes/atrium.toml")),
    ("powerplant", include_str!("../../scenes/powerplant.toml")),
    ("hairball", include_str!("../../scenes/hairball.toml")),
    ("planes", include_str!("../../scenes/planes.toml")),
];

/// The numbers of one scene file, consumed key by key by the scene's builder.
#[derive(Clone, Debug)]
pub struct SceneParams {
    scene: String,
    values: BTreeMap<String, f64>,
}

impl SceneParams {
    /// The embedded parameters of scene `name`.
    pub fn embedded(name: &str) -> Result<Self> {
        let (_, text) = SCENE_FILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| unknown_scene(name))?;
        Self::parse(name, text)
    }

    /// Parse the text of a scene file.
    pub fn parse(scene: &str, text: &str) -> Result<Self> {
        let table: BTreeMap<String, Entry> = toml::from_str(text).map_err(|e| {
            Error::format(format!("scenes/{scene}.toml: {}", e.message().trim_end()))
        })?;
        let mut values = BTreeMap::new();
        flatten("", table, &mut values);
        Ok(SceneParams {
            scene: scene.to_string(),
            values,
        })
    }

    /// Take the value of `key` (an error names the file and key when it is missing).
    pub fn take(&mut self, key: &str) -> Result<f32> {
        self.take_f64(key).map(|v| v as f32)
    }

    /// Take a count: a non-negative whole number.
    pub fn take_count(&mut self, key: &str) -> Result<usize> {
        let v = self.take_f64(key)?;
        if v < 0.0 || v.fract() != 0.0 {
            return Err(Error::format(format!(
                "scenes/{}.toml: {key} must be a whole number, not {v}",
                self.scene
            )));
        }
        Ok(v as usize)
    }

    /// Take a (min, max) pair stored as `key.min` and `key.max`.
    pub fn take_range(&mut self, key: &str) -> Result<(f32, f32)> {
        let lo = self.take(&format!("{key}.min"))?;
        let hi = self.take(&format!("{key}.max"))?;
        if lo > hi {
            return Err(Error::format(format!(
                "scenes/{}.toml: {key}.min {lo} is above {key}.max {hi}",
                self.scene
            )));
        }
        Ok((lo, hi))
    }

    fn take_f64(&mut self, key: &str) -> Result<f64> {
        self.values.remove(key).ok_or_else(|| {
            Error::format(format!(
                "scenes/{}.toml: missing parameter {key}",
                self.scene
            ))
        })
    }

    /// Refuse keys no builder asked for (typos).
    pub fn finish(self) -> Result<()> {
        match self.values.keys().next() {
            None => Ok(()),
            Some(key) => Err(Error::format(format!(
                "scenes/{}.toml: unknown parameter {key}",
                self.scene
            ))),
        }
    }
}

/// One value of a scene file: a number, or a table of them (what a dotted key makes). Anything
/// else (strings, booleans, arrays) fails to deserialize, so the file is refused.
#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Number(f64),
    Table(BTreeMap<String, Entry>),
}

/// Flatten nested tables into `a.b.c` keys.
fn flatten(prefix: &str, table: BTreeMap<String, Entry>, out: &mut BTreeMap<String, f64>) {
    for (key, entry) in table {
        let key = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match entry {
            Entry::Number(v) => {
                out.insert(key, v);
            }
            Entry::Table(inner) => flatten(&key, inner, out),
        }
    }
}

/// The error for a scene name that does not exist, listing those that do.
pub fn unknown_scene(name: &str) -> Error {
    let names: Vec<&str> = SCENE_FILES.iter().map(|(n, _)| *n).collect();
    Error::Usage(format!(
        "unknown scene {name:?}; the scenes are {}",
        names.join(", ")
    ))
}
