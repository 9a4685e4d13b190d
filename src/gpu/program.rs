//! Loading the compute stages in `glsl/`: the sources are embedded with `include_str!`, a tiny
//! resolver inlines `#include "file"` (once per program) and `#include_as "file" NAME` (every
//! time, with the token prefix `SRC` renamed to `NAME`, so one image template serves images A, B
//! and OUT), `#define`s specialise the stage (first the shared vocabulary's,
//! [`crate::vocab::glsl_defines`], then the stage's own), and each (stage, defines) program is
//! compiled once per context and cached.

use std::collections::HashSet;

use glow::HasContext;

use super::GlContext;
use crate::error::{Error, Result};

fn source(name: &str) -> Result<&'static str> {
    super::stages::glsl_file(name)
        .map(|f| f.text)
        .ok_or_else(|| Error::internal(format!("glsl/{name}: no such shader file")))
}

/// The `#define`s a stage is specialised with (the registry's type, named here too because
/// every loader asks for a program with them).
pub use super::stages::Defines;

/// The full source of `stage` with its includes inlined and `defines` in front. Files are
/// numbered for `#line` in the order they are first met; the table comes back for error messages.
pub fn resolve(stage: &str, defines: &Defines) -> Result<(String, Vec<String>)> {
    let mut out = String::from("#version 430 core\n");
    // The shared vocabulary first (layout ids), then the stage's own specialisation.
    for (name, value) in crate::vocab::glsl_defines() {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    for (name, value) in &defines.0 {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    let mut files = Vec::new();
    let mut once = HashSet::new();
    inline(stage, None, &mut out, &mut files, &mut once, 0)?;
    Ok((out, files))
}

fn inline(
    name: &str,
    rename: Option<&str>,
    out: &mut String,
    files: &mut Vec<String>,
    once: &mut HashSet<String>,
    depth: usize,
) -> Result<()> {
    if depth > 8 {
        return Err(Error::internal(format!(
            "glsl/{name}: includes nest too deep"
        )));
    }
    let number = files.iter().position(|f| f == name).unwrap_or_else(|| {
        files.push(name.to_string());
        files.len() - 1
    });
    let text = source(name)?;
    out.push_str(&format!("#line 1 {number}\n"));
    for (line_index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("#include_as") {
            let (file, new_name) = parse_include(name, rest, true)?;
            inline(&file, new_name.as_deref(), out, files, once, depth + 1)?;
            out.push_str(&format!("#line {} {number}\n", line_index + 2));
        } else if let Some(rest) = trimmed.strip_prefix("#include") {
            let (file, _) = parse_include(name, rest, false)?;
            // Once per program, but once per renaming inside an `#include_as`.
            if once.insert(format!("{file}|{}", rename.unwrap_or(""))) {
                inline(&file, rename, out, files, once, depth + 1)?;
                out.push_str(&format!("#line {} {number}\n", line_index + 2));
            } else {
                out.push('\n');
            }
        } else {
            match rename {
                Some(new_name) => out.push_str(&line.replace("SRC", new_name)),
                None => out.push_str(line),
            }
            out.push('\n');
        }
    }
    Ok(())
}

fn parse_include(from: &str, rest: &str, with_name: bool) -> Result<(String, Option<String>)> {
    let bad = || Error::internal(format!("glsl/{from}: malformed include `{}`", rest.trim()));
    let rest = rest.trim();
    let rest = rest.strip_prefix('"').ok_or_else(bad)?;
    let end = rest.find('"').ok_or_else(bad)?;
    let file = rest[..end].to_string();
    let tail = rest[end + 1..].trim();
    if with_name {
        if tail.is_empty() || !tail.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(bad());
        }
        Ok((file, Some(tail.to_string())))
    } else {
        Ok((file, None))
    }
}

/// A stage that failed to compile or link, as one line: the driver's log has its lines joined
/// with " | " so the CLI's one-line error rule holds here too.
fn build_failure(stage: &str, step: &str, context: &str, log: &str) -> Error {
    let log: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    Error::Gl(format!(
        "glsl/{stage} failed to {step} ({context}): {}",
        log.join(" | ")
    ))
}

impl GlContext {
    /// The program for `stage` specialised with `defines`, compiled on first use.
    pub fn program(&self, stage: &str, defines: &Defines) -> Result<glow::Program> {
        let key = format!("{stage}|{:?}", defines.0);
        if let Some(program) = self.programs.borrow().get(&key) {
            return Ok(*program);
        }
        let _span = crate::timeline::span(|| format!("compile {stage}"));
        let (text, files) = resolve(stage, defines)?;
        let table = files
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{i}={f}"))
            .collect::<Vec<_>>()
            .join(" ");
        let gl = &self.gl;
        // SAFETY: plain object creation and queries on the current context.
        let program = unsafe {
            let shader = gl
                .create_shader(glow::COMPUTE_SHADER)
                .map_err(|e| Error::Gl(format!("glsl/{stage}: cannot create shader: {e}")))?;
            gl.shader_source(shader, &text);
            gl.compile_shader(shader);
            if !gl.get_shader_compile_status(shader) {
                let log = gl.get_shader_info_log(shader);
                gl.delete_shader(shader);
                let context = format!("defines {:?}; source numbers {table}", defines.0);
                return Err(build_failure(stage, "compile", &context, &log));
            }
            let program = gl
                .create_program()
                .map_err(|e| Error::Gl(format!("glsl/{stage}: cannot create program: {e}")))?;
            gl.attach_shader(program, shader);
            // Lets `merge_program_binary` read the driver's compiled form (NVIDIA's holds the
            // assembly); no cost unless asked for.
            gl.program_binary_retrievable_hint(program, true);
            gl.link_program(program);
            gl.detach_shader(program, shader);
            gl.delete_shader(shader);
            if !gl.get_program_link_status(program) {
                let log = gl.get_program_info_log(program);
                gl.delete_program(program);
                let context = format!("defines {:?}", defines.0);
                return Err(build_failure(stage, "link", &context, &log));
            }
            program
        };
        self.tag_debug_messages(&format!("glsl/{stage} (sources {table})"));
        self.learn_blocks(program, &text);
        self.programs.borrow_mut().insert(key, program);
        Ok(program)
    }

    /// The program for `stage` with `defines` ([`Self::program`]), made the current program.
    pub(crate) fn use_stage(&self, stage: &str, defines: &Defines) -> Result<glow::Program> {
        let program = self.program(stage, defines)?;
        self.use_program(stage, program);
        Ok(program)
    }

    /// Make `program` (of this context, made from `stage`) the current program: the one the
    /// next dispatch is timed as and checked against (strict mode).
    pub(crate) fn use_program(&self, stage: &str, program: glow::Program) {
        self.current_stage
            .set(super::stages::stage_of_program(stage));
        // SAFETY: the program belongs to this context.
        unsafe { self.gl.use_program(Some(program)) };
        self.current_program.set(Some(program));
        self.gl_called("glUseProgram");
    }

    /// Set a `uint` uniform of the bound program (absent uniforms are ignored, as GL does).
    pub(crate) fn uniform_u32(&self, program: glow::Program, name: &str, value: u32) {
        // SAFETY: the program belongs to this context and is in use.
        unsafe {
            let location = self.gl.get_uniform_location(program, name);
            self.gl.uniform_1_u32(location.as_ref(), value);
        }
        self.gl_called("glUniform1ui");
    }

    /// Set an `int` uniform of the bound program (absent uniforms are ignored, as GL does).
    pub(crate) fn uniform_i32(&self, program: glow::Program, name: &str, value: i32) {
        // SAFETY: the program belongs to this context and is in use.
        unsafe {
            let location = self.gl.get_uniform_location(program, name);
            self.gl.uniform_1_i32(location.as_ref(), value);
        }
        self.gl_called("glUniform1i");
    }

    /// Run `program` (already in use) once per pixel: set `u_pixels`, bind each buffer to its
    /// binding, dispatch `pixels` invocations in groups of [`GROUP_SIZE`](crate::vocab::GROUP_SIZE).
    pub(crate) fn run_per_pixel(
        &self,
        program: glow::Program,
        pixels: usize,
        bindings: &[(u32, &super::GpuBuffer)],
    ) -> Result<()> {
        self.uniform_u32(program, "u_pixels", pixels as u32);
        for (binding, buffer) in bindings {
            buffer.bind(*binding);
        }
        self.dispatch(pixels, crate::vocab::GROUP_SIZE as usize)
    }

    /// Run `program` (already in use) over `threads` invocations of `local` each, splitting the
    /// groups into rows so no dimension passes 65535.
    pub(crate) fn dispatch(&self, threads: usize, local: usize) -> Result<()> {
        let bytes = self.next_dispatch_bytes.replace(0);
        self.timed(self.current_stage.get(), bytes, || {
            self.dispatch_untimed(threads, local)
        })
    }

    /// Say that the next [`Self::dispatch`] reads and writes at least `bytes` (for the
    /// per-stage GB/s of a profile).
    pub(crate) fn set_dispatch_bytes(&self, bytes: u64) {
        self.next_dispatch_bytes.set(bytes);
    }

    pub(crate) fn dispatch_untimed(&self, threads: usize, local: usize) -> Result<()> {
        let groups = threads.div_ceil(local).max(1);
        let x = groups.min(65535);
        let y = groups.div_ceil(x);
        if y > 65535 {
            return Err(Error::Gl(format!(
                "{threads} invocations are too many for one dispatch"
            )));
        }
        if let Some(program) = self.current_program.get() {
            let blocks = self.blocks_of(program);
            let stage = self.current_stage.get();
            self.with_checker(|c| c.dispatch(stage, &blocks));
        }
        self.fences.issued();
        let barrier = glow::SHADER_STORAGE_BARRIER_BIT | glow::BUFFER_UPDATE_BARRIER_BIT;
        // SAFETY: a dispatch with a program in use; barriers make the writes visible to the next
        // stage and to buffer reads.
        unsafe {
            self.gl.dispatch_compute(x as u32, y as u32, 1);
            self.gl.memory_barrier(barrier);
        }
        self.with_checker(|c| c.barrier(barrier));
        self.check("glDispatchCompute")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::stages::GLSL_FILES as SOURCES;
    use crate::vocab::Layout;

    #[test]
    fn layout_ids_come_from_rust_once_in_every_stage() {
        for name in SOURCES
            .iter()
            .map(|f| f.name)
            .filter(|n| n.ends_with(".comp"))
        {
            let (text, _) = resolve(name, &Defines::default()).unwrap();
            for layout in Layout::ALL {
                let define = format!("#define {} {}\n", layout.glsl_name(), layout.glsl_id());
                assert_eq!(text.matches(&define).count(), 1, "{name}: {define}");
                let any = format!("#define {} ", layout.glsl_name());
                assert_eq!(text.matches(&any).count(), 1, "{name} redefines {any}");
            }
        }
    }

    /// Each shared GLSL rule, with the text only its definition spells: (home file, spelling).
    const RULE_HOMES: &[(&str, &str)] = &[
        // "over": every stage that composites gets it from over.glsl.
        ("over.glsl", "(1.0 - g_acc["),
        // Splitting a volume and mixing optical depths: tidy.comp and slice.comp share them.
        ("volume_split.glsl", "vec2 split_alpha("),
        ("volume_split.glsl", "float piece_fraction("),
        ("volume_split.glsl", "float optical_depth("),
        ("volume_split.glsl", "float alpha_of_depth("),
        // The naive split that loses small alphas must not come back anywhere.
        ("(nowhere)", "exp(f * log("),
    ];

    #[test]
    fn each_rule_has_one_home() {
        for (home, spelling) in RULE_HOMES {
            for file in SOURCES {
                assert_eq!(
                    file.text.contains(spelling),
                    file.name == *home,
                    "{}: `{spelling}`",
                    file.name
                );
            }
        }
        // And the homes are really used: a stage that cuts volumes includes volume_split.glsl.
        for stage in ["tidy.comp", "slice.comp"] {
            let (text, files) = resolve(stage, &Defines::default()).unwrap();
            assert!(files.iter().any(|f| f == "volume_split.glsl"), "{stage}");
            assert_eq!(text.matches("vec2 split_alpha(").count(), 1, "{stage}");
        }
    }
}
