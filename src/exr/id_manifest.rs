//! OpenEXR's id manifest (`idManifest`, type `idmanifest`): the names behind the numbers of id
//! channels, so that `idselect` can take `--id "id=blob/*"` instead of the numbers.
//!
//! The format, as OpenEXR's `ImfIDManifest.cpp` and `ImfIDManifestAttribute.cpp` read it:
//! - the attribute: the uncompressed size (little-endian; OpenEXR writes it as 8 bytes, and a
//!   4-byte size is accepted too), then a zlib stream;
//! - the stream: a version (u32 0), the **string table**, its **index mapping**, and the
//!   **groups**. Integers are little-endian i32 unless said; a *varint* is 7 bits a byte, least
//!   significant first, the top bit set on every byte but the last;
//! - a *string list*: a count (omitted where the caller knows it), every length as a varint,
//!   then the strings' bytes one after another;
//! - the string table is a string list whose strings after the first are prefix-coded: the
//!   first byte (two bytes, big-endian, when the previous string is longer than 255) says how
//!   many leading characters come from the previous string, the rest follows;
//! - the mapping: a count of (first, last) i32 ranges; walking them in order and skipping
//!   indices already seen gives, for each code used in the tables, its index in the table;
//! - the groups: a count, then per group the channels (a string list, e.g. `id`), the
//!   components (a string list, e.g. `model`, `material`), the lifetime (one byte), the hash
//!   scheme and the encoding scheme (each a u32 length and bytes), the storage scheme (one
//!   byte: 0 ids as u64, 1 as u32, else varints), the number of entries (i32), and per entry
//!   the id (delta-coded from the previous entry's) and one varint string code per component.
//!
//! Every read is bounds-checked; a manifest that does not decode is an error naming the
//! problem, never a panic or an allocation larger than the data can fill.

use crate::error::{Error, Result};

/// The largest uncompressed manifest accepted (the attribute says its size before inflating).
const MAX_MANIFEST_BYTES: u64 = 1 << 28;

/// One group of the manifest: the channels it names the ids of, and each id's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdGroup {
    /// The channels whose ids these are (e.g. `id`, `particleid`).
    pub channels: Vec<String>,
    /// What each of an id's names is (e.g. `model`, `material`); may be empty.
    pub components: Vec<String>,
    /// The hash scheme the ids were made with (`MurmurHash3_32`, `none`, ...).
    pub hash_scheme: String,
    /// The encoding scheme (`id` for one channel, `id2` for 64-bit ids over two).
    pub encoding_scheme: String,
    /// Every id with its names, one per component, in increasing id order.
    pub entries: Vec<(u64, Vec<String>)>,
}

/// A decoded id manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdManifest {
    /// The groups, in file order.
    pub groups: Vec<IdGroup>,
}

impl IdManifest {
    /// Decode the value of an `idmanifest` attribute.
    pub fn from_attribute(value: &[u8]) -> Result<IdManifest> {
        let bad = |why: &str| Error::format(format!("its idManifest attribute {why}"));
        // The size field: 8 bytes as OpenEXR writes it, or 4; the zlib stream follows.
        let mut attempts = Vec::new();
        for width in [8usize, 4] {
            if value.len() < width {
                continue;
            }
            let mut size_bytes = [0u8; 8];
            size_bytes[..width].copy_from_slice(&value[..width]);
            let size = u64::from_le_bytes(size_bytes);
            if size > MAX_MANIFEST_BYTES {
                attempts.push(format!("declares {size} bytes uncompressed"));
                continue;
            }
            match miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(
                &value[width..],
                size as usize,
            ) {
                Ok(data) if data.len() as u64 == size => {
                    return Self::decode(&data).map_err(|why| bad(&why));
                }
                Ok(data) => attempts.push(format!(
                    "inflates to {} bytes, not the {size} it declares",
                    data.len()
                )),
                Err(e) => attempts.push(format!("does not inflate ({:?})", e.status)),
            }
        }
        Err(bad(attempts.first().map_or("is too short", String::as_str)))
    }

    /// Decode the uncompressed manifest.
    fn decode(data: &[u8]) -> std::result::Result<IdManifest, String> {
        let mut r = Reader { data, at: 0 };
        let version = r.u32()?;
        if version != 0 {
            return Err(format!("has version {version}; only version 0 is known"));
        }
        let mut strings = r.string_list(None)?;
        for i in 1..strings.len() {
            let previous = &strings[i - 1];
            let wide = previous.len() > 255;
            let head = if wide { 2 } else { 1 };
            let coded = &strings[i];
            if coded.len() < head {
                return Err("has a string too short for its common-prefix length".into());
            }
            let common = if wide {
                (coded[0] as usize) << 8 | coded[1] as usize
            } else {
                coded[0] as usize
            };
            if common > previous.len() {
                return Err("has a common prefix longer than the string before it".into());
            }
            let mut full = previous[..common].to_vec();
            full.extend_from_slice(&coded[head..]);
            strings[i] = full;
        }
        let ranges = r.count("mapping ranges", 8)?;
        let mut mapping = Vec::with_capacity(strings.len());
        let mut seen = vec![false; strings.len()];
        for _ in 0..ranges {
            let (first, last) = (r.i32()?, r.i32()?);
            if first < 0 || first > last || last as usize >= strings.len() {
                return Err(format!(
                    "has a bad mapping range ({first}, {last}) for {} strings",
                    strings.len()
                ));
            }
            let range = first as usize..=last as usize;
            for (entry, seen) in seen
                .iter_mut()
                .enumerate()
                .take(*range.end() + 1)
                .skip(*range.start())
            {
                if !*seen {
                    *seen = true;
                    mapping.push(entry);
                }
            }
        }
        let group_count = r.count("groups", 14)?;
        let mut groups = Vec::with_capacity(group_count);
        for _ in 0..group_count {
            let channels = r.text_list()?;
            let components = r.text_list()?;
            let _lifetime = r.u8()?;
            let hash_scheme = r.pascal()?;
            let encoding_scheme = r.pascal()?;
            let storage = r.u8()?;
            let count = r.count("entries", 1)?;
            let mut entries = Vec::with_capacity(count);
            let mut previous = 0u64;
            for _ in 0..count {
                let delta = match storage {
                    0 => r.u64()?,
                    1 => r.u32()? as u64,
                    _ => r.varint()?,
                };
                let id = previous.wrapping_add(delta);
                if !entries.is_empty() && id <= previous {
                    return Err(format!("lists id {id} twice or out of order"));
                }
                previous = id;
                let names = (0..components.len())
                    .map(|_| {
                        let code = r.varint()? as usize;
                        let index = *mapping
                            .get(code)
                            .ok_or_else(|| format!("has a bad string code {code}"))?;
                        Ok(String::from_utf8_lossy(&strings[index]).into_owned())
                    })
                    .collect::<std::result::Result<Vec<_>, String>>()?;
                entries.push((id, names));
            }
            groups.push(IdGroup {
                channels,
                components,
                hash_scheme,
                encoding_scheme,
                entries,
            });
        }
        Ok(IdManifest { groups })
    }

    /// The group naming the ids of `channel`, if any.
    pub fn group_of(&self, channel: &str) -> Option<&IdGroup> {
        self.groups
            .iter()
            .find(|g| g.channels.iter().any(|c| c == channel))
    }

    /// A one-line summary per group: its channels, components, scheme and number of ids.
    pub fn summary(&self) -> Vec<String> {
        self.groups
            .iter()
            .map(|g| {
                format!(
                    "channels {}: {} ids{}, hash {}, encoding {}",
                    g.channels.join(","),
                    g.entries.len(),
                    if g.components.is_empty() {
                        String::new()
                    } else {
                        format!(" named by {}", g.components.join(","))
                    },
                    g.hash_scheme,
                    g.encoding_scheme
                )
            })
            .collect()
    }
}

/// A bounds-checked little-endian reader over the uncompressed manifest.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| "ends early".to_string())?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn i32(&mut self) -> std::result::Result<i32, String> {
        Ok(self.u32()? as i32)
    }

    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A count of items that each take at least `min_bytes`: refused when negative or when the
    /// data left cannot hold that many (so no allocation outgrows the data).
    fn count(&mut self, what: &str, min_bytes: usize) -> std::result::Result<usize, String> {
        let n = self.i32()?;
        let left = self.data.len() - self.at;
        if n < 0 || (n as usize).saturating_mul(min_bytes) > left {
            return Err(format!("has a bad count of {what} ({n})"));
        }
        Ok(n as usize)
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            if shift >= 64 {
                return Err("has a variable-length integer longer than 64 bits".into());
            }
            let byte = self.u8()?;
            value |= ((byte & 127) as u64) << shift;
            shift += 7;
            if byte & 128 == 0 {
                return Ok(value);
            }
        }
    }

    /// A string list: its count (unless `known`), the lengths, then the bytes.
    fn string_list(&mut self, known: Option<usize>) -> std::result::Result<Vec<Vec<u8>>, String> {
        let n = match known {
            Some(n) => n,
            None => self.count("strings", 1)?,
        };
        let lengths = (0..n)
            .map(|_| self.varint())
            .collect::<std::result::Result<Vec<u64>, String>>()?;
        lengths
            .into_iter()
            .map(|len| {
                let len = usize::try_from(len).map_err(|_| "has a string too long".to_string())?;
                Ok(self.take(len)?.to_vec())
            })
            .collect()
    }

    fn text_list(&mut self) -> std::result::Result<Vec<String>, String> {
        Ok(self
            .string_list(None)?
            .into_iter()
            .map(|s| String::from_utf8_lossy(&s).into_owned())
            .collect())
    }

    /// A string stored as a u32 length and its bytes.
    fn pascal(&mut self) -> std::result::Result<String, String> {
        let len = self.u32()? as usize;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest written by hand in the format: two strings prefix-coded, one group.
    fn sample() -> Vec<u8> {
        let mut d = Vec::new();
        d.extend(0u32.to_le_bytes());
        // Strings "geo/chair", "geo/table" (4 characters in common: "\x04table").
        d.extend(2i32.to_le_bytes());
        d.extend([9u8, 6]);
        d.extend(b"geo/chair");
        d.extend(b"\x04table");
        // Mapping: (1, 1) then (0, 1): codes 0 -> string 1, 1 -> string 0.
        d.extend(2i32.to_le_bytes());
        for v in [1i32, 1, 0, 1] {
            d.extend(v.to_le_bytes());
        }
        d.extend(1i32.to_le_bytes());
        d.extend(1i32.to_le_bytes());
        d.push(2);
        d.extend(b"id");
        d.extend(1i32.to_le_bytes());
        d.push(5);
        d.extend(b"model");
        d.push(0);
        d.extend(4u32.to_le_bytes());
        d.extend(b"none");
        d.extend(2u32.to_le_bytes());
        d.extend(b"id");
        d.push(2); // varint ids
        d.extend(2i32.to_le_bytes());
        d.extend([7u8, 1]); // id 7, code 1 -> "geo/chair"
        d.extend([0x80u8, 0x01, 0]); // delta 128: id 135, code 0 -> "geo/table"
        d
    }

    fn attribute(data: &[u8]) -> Vec<u8> {
        let mut a = (data.len() as u64).to_le_bytes().to_vec();
        a.extend(miniz_oxide::deflate::compress_to_vec_zlib(data, 6));
        a
    }

    #[test]
    fn a_hand_written_manifest_decodes() {
        let m = IdManifest::from_attribute(&attribute(&sample())).unwrap();
        let g = m.group_of("id").unwrap();
        assert_eq!(g.components, vec!["model"]);
        assert_eq!(
            g.entries,
            vec![
                (7, vec!["geo/chair".into()]),
                (135, vec!["geo/table".into()])
            ]
        );
        assert!(m.group_of("other").is_none());
        // A 4-byte size field reads the same.
        let data = sample();
        let mut four = (data.len() as u32).to_le_bytes().to_vec();
        four.extend(miniz_oxide::deflate::compress_to_vec_zlib(&data, 6));
        assert_eq!(IdManifest::from_attribute(&four).unwrap(), m);
    }

    #[test]
    fn every_truncation_and_bad_value_is_an_error() {
        let data = sample();
        for n in 0..data.len() {
            assert!(
                IdManifest::from_attribute(&attribute(&data[..n])).is_err(),
                "{n}"
            );
        }
        assert!(IdManifest::from_attribute(b"").is_err());
        assert!(IdManifest::from_attribute(&[0xff; 16]).is_err());
        // A huge count is refused before anything is allocated.
        let mut huge = data.clone();
        huge[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
        let err = IdManifest::from_attribute(&attribute(&huge)).unwrap_err();
        assert!(err.to_string().contains("bad count"), "{err}");
    }
}
