//! The GL engine's strict mode: llvmpipe made as strict as a GPU (docs/architecture.md,
//! "Strict mode"). Mesa's software rasteriser runs each dispatch to the end inside
//! `glDispatchCompute` and hands out zeroed memory, so a missing wait, a missing barrier or a
//! read of unset memory passes there and writes wrong pixels on a GPU. In strict mode:
//! - **hazards fail**: every dispatch, copy, upload, readback, barrier, fence and pool take goes
//!   through the checker of `hazard.rs`;
//! - **poison**: every buffer taken from the pool or newly allocated is filled with NaN and
//!   0xFFFFFFFF words unless its caller asked for zeros, so a stage that assumes zeros fails;
//! - **fences are behind**: a fence poll (a pool take, a free staging buffer) never says
//!   signalled, so the engine takes the path it takes on a GPU that is behind the host (waits on
//!   the GPU, new staging buffers) and the checker sees only the waits that path makes;
//! - **GL errors fail**: `glGetError` after every GL call of the engine, and `KHR_debug` messages
//!   of high and medium severity from a debug context, except performance notes and other
//!   messages that are not about correctness (NVIDIA reports moving a buffer between video and
//!   host memory as a medium-severity performance warning).
//!
//! What was found is reported by [`GlContext::strict_report`], which [`GlContext::check`] calls
//! after every dispatch and copy; the GL merges call it before they return. Strict mode is on when
//! the context is made with [`GlContext::new_with`]`(true)` or when `DEEPMERGE_GL_STRICT=1` is set
//! (the test suite sets both), and costs an upload of poison per buffer taken.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use glow::HasContext;

use super::hazard::{Access, HazardChecker};
use super::{GlContext, GpuBuffer};
use crate::error::{Error, Result};

/// The environment variable that switches strict mode on for every context a process makes.
pub const STRICT_ENV: &str = "DEEPMERGE_GL_STRICT";

/// Whether `DEEPMERGE_GL_STRICT` asks for strict mode (any value but empty and `0`).
pub fn strict_from_env() -> bool {
    std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The poison words: a quiet NaN and all ones (NaN as a float, the largest uint, -1 as an int).
const POISON: [u32; 2] = [0x7fc0_0000, 0xffff_ffff];

/// Strict mode's state in a context.
#[derive(Default)]
pub(crate) struct Strict {
    pub(crate) checker: RefCell<HazardChecker>,
    /// High and medium `KHR_debug` messages, from the driver's callback.
    pub(crate) debug_messages: Arc<Mutex<Vec<String>>>,
    /// The storage blocks of each program: (binding, access).
    blocks: RefCell<HashMap<glow::Program, Vec<(u32, Access)>>>,
    /// GL errors found after calls that return nothing.
    errors: RefCell<Vec<String>>,
}

/// The storage blocks `source` (a resolved stage) declares: (block name, binding, access), with
/// `#define`d bindings and qualifiers expanded (`image.glsl`'s `SRC_BINDING_0`, `SRC_ACCESS`).
/// Access comes from `readonly`/`writeonly`; a name declared with different qualifiers in
/// different `#if` branches counts as both. The driver's list says which are active.
fn declared_blocks(source: &str) -> Vec<(String, u32, Access)> {
    let defines: HashMap<&str, &str> = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .map(|d| {
            let d = d.trim();
            match d.split_once(char::is_whitespace) {
                Some((name, value)) => (name, value.trim()),
                None => (d, ""),
            }
        })
        .collect();
    let expand = |token: &'_ str| -> String {
        let mut token = token.to_string();
        for _ in 0..4 {
            match defines.get(token.as_str()) {
                Some(value) => token = value.to_string(),
                None => break,
            }
        }
        token
    };
    let mut out: Vec<(String, u32, Access)> = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        let Some(inner) = line.strip_prefix("layout(") else {
            continue;
        };
        let Some(close) = inner.find(')') else {
            continue;
        };
        let Some(binding) = inner[..close]
            .split(',')
            .filter_map(|part| part.split_once('='))
            .find(|(key, _)| key.trim() == "binding")
            .and_then(|(_, value)| {
                expand(value.trim())
                    .trim_end_matches('u')
                    .parse::<u32>()
                    .ok()
            })
        else {
            continue;
        };
        let words: Vec<String> = inner[close + 1..].split_whitespace().map(&expand).collect();
        let Some(at) = words.iter().position(|w| w == "buffer") else {
            continue;
        };
        let Some(name) = words.get(at + 1) else {
            continue;
        };
        let name = name.trim_end_matches('{').to_string();
        let qualifiers: Vec<&str> = words[..at]
            .iter()
            .flat_map(|w| w.split_whitespace())
            .collect();
        let access = if qualifiers.contains(&"readonly") {
            Access::Read
        } else if qualifiers.contains(&"writeonly") {
            Access::Write
        } else {
            Access::ReadWrite
        };
        match out.iter_mut().find(|(n, b, _)| *n == name && *b == binding) {
            Some((_, _, a)) if *a != access => *a = Access::ReadWrite,
            Some(_) => {}
            None => out.push((name, binding, access)),
        }
    }
    out
}

impl GlContext {
    /// Whether this context runs in strict mode.
    pub fn is_strict(&self) -> bool {
        self.strict.is_some()
    }

    /// Run `f` on the hazard checker (strict mode only).
    pub(crate) fn with_checker(&self, f: impl FnOnce(&mut HazardChecker)) {
        if let Some(strict) = &self.strict {
            f(&mut strict.checker.borrow_mut());
        }
    }

    /// The checker's serial now (0 outside strict mode).
    pub(crate) fn checker_serial(&self) -> u64 {
        self.strict
            .as_ref()
            .map_or(0, |s| s.checker.borrow().fence())
    }

    /// In strict mode, look for a GL error after `what` (a call that returns nothing); it is
    /// reported by the next [`Self::strict_report`].
    pub(crate) fn gl_called(&self, what: &str) {
        if let Some(strict) = &self.strict {
            // SAFETY: a plain query on the current context.
            let code = unsafe { self.gl.get_error() };
            if code != glow::NO_ERROR {
                strict
                    .errors
                    .borrow_mut()
                    .push(format!("{what} failed with GL error 0x{code:04x}"));
            }
        }
    }

    /// Everything strict mode found since the last report, as one error naming each finding
    /// (`Ok` outside strict mode or when nothing was found).
    pub fn strict_report(&self) -> Result<()> {
        let Some(strict) = &self.strict else {
            return Ok(());
        };
        self.gl_called("the last GL call");
        let mut found: Vec<String> = strict.errors.borrow_mut().drain(..).collect();
        found.extend(
            strict
                .checker
                .borrow_mut()
                .take_found()
                .into_iter()
                .map(|h| format!("hazard: {h}")),
        );
        if let Ok(mut messages) = strict.debug_messages.lock() {
            found.extend(messages.drain(..).map(|m| format!("KHR_debug: {m}")));
        }
        if found.is_empty() {
            return Ok(());
        }
        let more = found.len().saturating_sub(8);
        found.truncate(8);
        if more > 0 {
            found.push(format!("and {more} more"));
        }
        Err(Error::Gl(format!(
            "strict GL check failed on {}: {}",
            self.info().renderer,
            found.join("; ")
        )))
    }

    /// Say which stage the `KHR_debug` messages since the last call came from (its compiler's
    /// warnings arrive without a file name).
    pub(crate) fn tag_debug_messages(&self, source: &str) {
        let Some(strict) = &self.strict else { return };
        if let Ok(mut messages) = strict.debug_messages.lock() {
            for m in messages.iter_mut().filter(|m| m.starts_with("type ")) {
                *m = format!("{source}: {m}");
            }
        }
    }

    /// Learn `program`'s storage blocks (binding and access) from its `source` and the driver's
    /// list of active blocks, for the checker (strict mode only).
    pub(crate) fn learn_blocks(&self, program: glow::Program, source: &str) {
        let Some(strict) = &self.strict else { return };
        let mut blocks = Vec::new();
        for (name, binding, access) in declared_blocks(source) {
            // SAFETY: a query on a linked program of this context.
            let active = unsafe { self.gl.get_shader_storage_block_index(program, &name) };
            if active.is_some() {
                blocks.push((binding, access));
            }
        }
        self.gl_called("storage block introspection");
        strict.blocks.borrow_mut().insert(program, blocks);
    }

    /// The storage blocks of `program` as learnt at its link.
    pub(crate) fn blocks_of(&self, program: glow::Program) -> Vec<(u32, Access)> {
        self.strict.as_ref().map_or_else(Vec::new, |s| {
            s.blocks.borrow().get(&program).cloned().unwrap_or_default()
        })
    }

    /// Fill `buffer`'s whole storage with poison (strict mode only).
    pub(crate) fn poison(&self, buffer: &GpuBuffer) {
        if self.strict.is_none() {
            return;
        }
        let words: Vec<u32> = (0..buffer.capacity() / 4).map(|i| POISON[i % 2]).collect();
        buffer.write_as(&words, "poison");
    }

    /// Switch on `KHR_debug` output into `messages` (high and medium severity, of the types that
    /// say something is wrong: errors, undefined, deprecated or unportable behaviour), where the
    /// context offers it.
    pub(crate) fn enable_debug_output(gl: &mut glow::Context, messages: Arc<Mutex<Vec<String>>>) {
        if !gl.supports_debug() {
            return;
        }
        // SAFETY: the callback owns what it touches; DEBUG_OUTPUT_SYNCHRONOUS makes it run on
        // the calling thread, inside the call that caused it.
        unsafe {
            gl.enable(glow::DEBUG_OUTPUT);
            gl.enable(glow::DEBUG_OUTPUT_SYNCHRONOUS);
            gl.debug_message_callback(move |_source, kind, id, severity, text| {
                let wrong = matches!(
                    kind,
                    glow::DEBUG_TYPE_ERROR
                        | glow::DEBUG_TYPE_UNDEFINED_BEHAVIOR
                        | glow::DEBUG_TYPE_DEPRECATED_BEHAVIOR
                        | glow::DEBUG_TYPE_PORTABILITY
                );
                let serious = severity == glow::DEBUG_SEVERITY_HIGH
                    || severity == glow::DEBUG_SEVERITY_MEDIUM;
                if wrong && serious {
                    if let Ok(mut m) = messages.lock() {
                        m.push(format!("type 0x{kind:04x} id {id}: {text}"));
                    }
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_blocks_read_their_qualifiers_and_merge_branches() {
        let source = "\
layout(std430, binding = 0) readonly buffer FlagsBuf { uint flags[]; };
#if STEP == 0
layout(std430, binding = 1) writeonly buffer MarksBuf { uint marks[]; };
#else
layout(std430, binding = 1) readonly buffer MarksBuf { uint marks[]; };
#endif
layout(std430, binding = 3) writeonly buffer ListBuf { uint list[]; };
layout(std430, binding = 15) coherent buffer CoopScratch { uint coop[]; };
#define A_BINDING_0 5
#define A_ACCESS readonly
#define OUT_BINDING_0 10u
#define OUT_ACCESS
layout(std430, binding = A_BINDING_0) A_ACCESS buffer A_KeysBuf { Fragment A_keys[]; };
layout(std430, binding = OUT_BINDING_0) OUT_ACCESS buffer OUT_KeysBuf { Fragment OUT_keys[]; };
layout(local_size_x = 64) in;
";
        assert_eq!(
            declared_blocks(source),
            vec![
                ("FlagsBuf".to_string(), 0, Access::Read),
                ("MarksBuf".to_string(), 1, Access::ReadWrite),
                ("ListBuf".to_string(), 3, Access::Write),
                ("CoopScratch".to_string(), 15, Access::ReadWrite),
                ("A_KeysBuf".to_string(), 5, Access::Read),
                ("OUT_KeysBuf".to_string(), 10, Access::ReadWrite),
            ]
        );
    }
}
