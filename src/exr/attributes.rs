//! Header attributes as the file stores them: name, type name and value bytes.
//!
//! The `exr` crate parses the attributes it knows into typed fields and refuses a header whose
//! `compression` it does not know (ZSTD, id 13, came after it). The reader therefore walks the
//! headers itself first ([`read_headers`]): that walk finds where the headers end, each part's
//! compression id, and every attribute verbatim, which is what output carries through
//! ([`carried_attributes`]): copying the type name and the value bytes keeps every type exactly,
//! the ones no library here knows included.

use crate::error::{Error, Result};

/// One attribute of a header, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawAttribute {
    /// Attribute name.
    pub name: String,
    /// Type name (`chromaticities`, `m44f`, `string`, ...).
    pub kind: String,
    /// Value bytes.
    pub value: Vec<u8>,
}

impl RawAttribute {
    /// Append the attribute as a header stores it: name, type name, size, value.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend(self.name.as_bytes());
        out.push(0);
        out.extend(self.kind.as_bytes());
        out.push(0);
        out.extend((self.value.len() as i32).to_le_bytes());
        out.extend(&self.value);
    }

    /// The value as text, for `string` attributes.
    pub fn text(&self) -> Option<String> {
        (self.kind == "string").then(|| String::from_utf8_lossy(&self.value).into_owned())
    }

    /// The value as `deepmerge info --all-attributes` prints it: numbers for the numeric types
    /// OpenEXR defines, quoted text for strings, the size for anything else.
    pub fn display_value(&self) -> String {
        let v = &self.value;
        let i32s = || -> Vec<String> {
            v.chunks_exact(4)
                .map(|b| i32::from_le_bytes(b.try_into().unwrap()).to_string())
                .collect()
        };
        let f32s = || -> Vec<String> {
            v.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()).to_string())
                .collect()
        };
        let f64s = || -> Vec<String> {
            v.chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()).to_string())
                .collect()
        };
        let sized = |n: usize| v.len() == n;
        match self.kind.as_str() {
            "string" => format!("{:?}", String::from_utf8_lossy(v)),
            "stringvector" => {
                let mut texts = Vec::new();
                let mut at = 0;
                while at + 4 <= v.len() {
                    let n = i32::from_le_bytes(v[at..at + 4].try_into().unwrap()).max(0) as usize;
                    let end = (at + 4 + n).min(v.len());
                    texts.push(format!("{:?}", String::from_utf8_lossy(&v[at + 4..end])));
                    at = end;
                }
                format!("[{}]", texts.join(", "))
            }
            "int" | "v2i" | "v3i" | "box2i" if v.len().is_multiple_of(4) => i32s().join(" "),
            "float" | "v2f" | "v3f" | "box2f" | "m33f" | "m44f" | "chromaticities"
                if v.len().is_multiple_of(4) =>
            {
                f32s().join(" ")
            }
            "double" | "v2d" | "v3d" | "m33d" | "m44d" if v.len().is_multiple_of(8) => {
                f64s().join(" ")
            }
            "rational" if sized(8) => {
                let n = i32::from_le_bytes(v[..4].try_into().unwrap());
                let d = u32::from_le_bytes(v[4..].try_into().unwrap());
                format!("{n}/{d}")
            }
            "compression" if sized(1) => super::compression_name(v[0]).to_lowercase(),
            _ => format!("({} bytes)", v.len()),
        }
    }
}

/// Every header's attributes, in file order, and the byte position just past the headers.
pub(crate) struct HeaderWalk {
    pub(crate) headers: Vec<Vec<RawAttribute>>,
    pub(crate) end: usize,
    /// Per header, the position of the `compression` value byte, if it has one.
    pub(crate) compression_at: Vec<Option<usize>>,
}

/// Attribute values larger than this are refused (a hostile header could claim any size).
const MAX_ATTRIBUTE_BYTES: usize = 64 << 20;

/// Walk the header(s) of a file whose first bytes are `bytes`: attributes are
/// `name\0type\0size:i32 value`, a header ends with an empty name, and a multi-part file ends
/// its header list with one more empty name. `None` when `bytes` ends inside the headers.
pub(crate) fn read_headers(bytes: &[u8], multipart: bool) -> Option<HeaderWalk> {
    let mut at = 8;
    let cstr_end = |at: usize| {
        bytes
            .get(at..)?
            .iter()
            .position(|&b| b == 0)
            .map(|n| at + n)
    };
    let mut walk = HeaderWalk {
        headers: Vec::new(),
        end: 0,
        compression_at: Vec::new(),
    };
    loop {
        let mut attributes = Vec::new();
        let mut compression_at = None;
        loop {
            let name_end = cstr_end(at)?;
            if name_end == at {
                at += 1;
                break;
            }
            let type_end = cstr_end(name_end + 1)?;
            let size_bytes = bytes.get(type_end + 1..type_end + 5)?;
            let size = i32::from_le_bytes(size_bytes.try_into().ok()?);
            if size < 0 || size as usize > MAX_ATTRIBUTE_BYTES {
                return None;
            }
            let value_at = type_end + 5;
            let value = bytes.get(value_at..value_at + size as usize)?;
            let name = String::from_utf8_lossy(&bytes[at..name_end]).into_owned();
            let kind = String::from_utf8_lossy(&bytes[name_end + 1..type_end]).into_owned();
            if name == "compression" && kind == "compression" && size == 1 {
                compression_at = Some(value_at);
            }
            attributes.push(RawAttribute {
                name,
                kind,
                value: value.to_vec(),
            });
            at = value_at + size as usize;
        }
        walk.headers.push(attributes);
        walk.compression_at.push(compression_at);
        if !multipart {
            break;
        }
        if *bytes.get(at)? == 0 {
            at += 1;
            break;
        }
    }
    walk.end = at;
    Some(walk)
}

/// Attributes the writer states itself (the layout of the pixels it writes, and the file's own
/// bookkeeping): never carried from an input. The other required attributes
/// (`pixelAspectRatio`, `screenWindowCenter`, `screenWindowWidth`) are carried when the input
/// has them ([`REQUIRED_CARRIED`]).
pub const WRITER_OWNED: [&str; 13] = [
    "channels",
    "compression",
    "dataWindow",
    "displayWindow",
    "lineOrder",
    "chunkCount",
    "type",
    "version",
    "name",
    "maxSamplesPerPixel",
    "deepImageState",
    "tiles",
    "software",
];

/// Required attributes a writer states with a default value unless the carried attributes
/// hold them (with their type): then the input's value is written instead.
pub const REQUIRED_CARRIED: [(&str, &str); 3] = [
    ("pixelAspectRatio", "float"),
    ("screenWindowCenter", "v2f"),
    ("screenWindowWidth", "float"),
];

/// Which input attributes an output carries (`--metadata`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MetadataMode {
    /// The first input's attributes (its chosen part's), except those the writer owns.
    #[default]
    First,
    /// None: only what the writer states.
    None,
}

impl std::str::FromStr for MetadataMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        crate::error::parse_name(
            "the metadata",
            s,
            [("first", MetadataMode::First), ("none", MetadataMode::None)],
        )
    }
}

/// The attributes of `header` an output carries: all but [`WRITER_OWNED`], in file order (the
/// input's `software` among the left out: the output states its own, [`software_attribute`]).
pub fn carried_attributes(header: &[RawAttribute]) -> Vec<RawAttribute> {
    header
        .iter()
        .filter(|a| !WRITER_OWNED.contains(&a.name.as_str()))
        .cloned()
        .collect()
}

/// `software`: this program and its version.
pub fn software_attribute() -> RawAttribute {
    RawAttribute {
        name: "software".into(),
        kind: "string".into(),
        value: format!("deepmerge {}", env!("CARGO_PKG_VERSION")).into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(attributes: &[RawAttribute]) -> Vec<u8> {
        let mut bytes = vec![0x76, 0x2f, 0x31, 0x01, 2, 0, 0, 0];
        for a in attributes {
            a.write(&mut bytes);
        }
        bytes.push(0);
        bytes
    }

    fn attribute(name: &str, kind: &str, value: &[u8]) -> RawAttribute {
        RawAttribute {
            name: name.into(),
            kind: kind.into(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn attributes_are_read_back_verbatim() {
        let attributes = [
            attribute("compression", "compression", &[13]),
            attribute("owner", "string", b"me"),
            attribute("odd", "someFutureType", &[1, 2, 3, 4, 5]),
        ];
        let bytes = header(&attributes);
        let walk = read_headers(&bytes, false).unwrap();
        assert_eq!(walk.headers, [attributes.to_vec()]);
        assert_eq!(walk.end, bytes.len());
        assert_eq!(bytes[walk.compression_at[0].unwrap()], 13);
        // Cut anywhere inside, the walk says so instead of guessing.
        for cut in 8..bytes.len() {
            assert!(read_headers(&bytes[..cut], false).is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn carried_attributes_leave_out_what_the_writer_owns() {
        let carried = carried_attributes(&[
            attribute("channels", "chlist", &[0]),
            attribute("owner", "string", b"me"),
            attribute("software", "string", b"renderer"),
            attribute("worldToCamera", "m44f", &[0; 64]),
        ]);
        let names: Vec<&str> = carried.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["owner", "worldToCamera"]);
        assert!(software_attribute()
            .text()
            .unwrap()
            .starts_with("deepmerge "));
    }
}
