//! `deepmerge view` as a person uses it: a real window on a virtual X server (Xvfb) under Mesa's
//! llvmpipe, real input events (xdotool: keys and a click), real screenshots (ImageMagick's
//! `import`), and what is drawn checked against the headless merge of the same files:
//! composite colours against the flat merge through the display transform, heatmap colours
//! against the heatmap's bins, a depth slice against the host twin of the slice pass, and the
//! pinned pixel's table (copied to stdout) against `deepmerge info --pixel`. Layers split into
//! bands of storage buffers are checked headless against the unsplit layer and the host twin,
//! and drawn in a window against the merge; the viewer's errors against the CLI's lines.
//!
//! Xvfb, xdotool and ImageMagick are required: without them the test fails, naming the Debian
//! packages (CI installs them), so a missing tool cannot pass for a pass.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deepmerge::composite::{merge_images, MergeOptions, MergeOutput, OutputKind};
use deepmerge::deep::{DeepImage, FlatImage, FlatValues};
use deepmerge::exr::{read_deep, ReadOptions};
use deepmerge::gpu::GlContext;
use deepmerge::view::display::{display_byte, heat_colour};
use deepmerge::view::gpu::{plan_layer, GpuLayer};
use deepmerge::view::load::{load, LoadEvent, LoadRequest, Loaded};

const PACKAGES: &str =
    "apt-get install xvfb xdotool imagemagick x11-utils libxkbcommon-x11-0 libxcursor1 libxi6 libxrandr2";
/// Window size the test asks for: the image area is this width less the panel.
const WINDOW: (u32, u32) = (1400, 760);
/// How long to wait for the window to show a change (llvmpipe on a loaded CI machine).
const PATIENCE: Duration = Duration::from_secs(180);

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_deepmerge")
}

fn inputs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    ["Balls.exr", "Leaves.exr", "Trunks.exr"]
        .iter()
        .map(|f| dir.join(f))
        .collect()
}

fn require(tool: &str, probe: &[&str]) {
    let ok = Command::new(tool)
        .args(probe)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        ok,
        "{tool} is required by the window test (CI installs it): {PACKAGES}"
    );
}

/// A virtual X server on a free display, stopped on drop.
struct Xvfb {
    child: Child,
    display: String,
}

impl Xvfb {
    /// The server picks its own free display (`-displayfd`) and says which once it accepts
    /// connections. Its own lock check clears the stale locks a killed server leaves behind,
    /// where probing for lock files would give up on a machine that has gathered many.
    fn start() -> Xvfb {
        require("Xvfb", &["-help"]);
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1"])
            .args(["-screen", "0", "1600x1000x24", "-nolisten", "tcp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start Xvfb ({e}): {PACKAGES}"));
        let mut line = String::new();
        // Xvfb writes the number when it is ready, or exits (end of file) when it cannot start.
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let Ok(n) = line.trim().parse::<u32>() else {
            let _ = child.kill();
            let status = child.wait();
            panic!("no Xvfb display could be started ({status:?}, said {line:?})");
        };
        Xvfb {
            child,
            display: format!(":{n}"),
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("DISPLAY", &self.display);
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}; {PACKAGES}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Xvfb {
    /// SIGTERM first, so the server removes its lock and socket; SIGKILL if it lingers.
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid, which `wait` has not reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `deepmerge view` with its stdout and stderr lines collected.
struct Viewer {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
    window: String,
}

fn collect(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(|l| l.ok()) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

impl Viewer {
    fn start(x: &Xvfb, files: &[PathBuf]) -> Viewer {
        Viewer::start_with(x, files, &[])
    }

    fn start_with(x: &Xvfb, files: &[PathBuf], options: &[&str]) -> Viewer {
        let mut child = x
            .command(binary())
            .arg("view")
            .args(files)
            .args(options)
            .args(["--size", &format!("{}x{}", WINDOW.0, WINDOW.1)])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        let mut viewer = Viewer {
            child,
            stdout,
            stderr,
            window: String::new(),
        };
        viewer.wait_for(|l| l.starts_with("deepmerge view: window open"));
        let start = Instant::now();
        loop {
            let found = x
                .command("xdotool")
                .args(["search", "--name", "deepmerge view"])
                .output()
                .unwrap_or_else(|e| panic!("xdotool: {e}; {PACKAGES}"));
            let id = String::from_utf8_lossy(&found.stdout)
                .lines()
                .next()
                .map(str::to_string);
            if let Some(id) = id {
                viewer.window = id;
                break;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "no window titled deepmerge view"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // No window manager gives focus under Xvfb: take it, so XTEST keys reach the window.
        x.run("xdotool", &["windowfocus", "--sync", &viewer.window]);
        viewer
    }

    /// The first stderr line from now on (or already seen after `from`) that `accept`s.
    fn wait_for_after(&mut self, from: usize, accept: impl Fn(&str) -> bool) -> (usize, String) {
        let start = Instant::now();
        loop {
            {
                let lines = self.stderr.lock().unwrap();
                if let Some((i, l)) = lines.iter().enumerate().skip(from).find(|(_, l)| accept(l)) {
                    return (i, l.clone());
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Its last lines may still be in the pipe: give the reader a moment, then look
                // once more before calling the exit a failure.
                std::thread::sleep(Duration::from_millis(500));
                let lines = self.stderr.lock().unwrap();
                if let Some((i, l)) = lines.iter().enumerate().skip(from).find(|(_, l)| accept(l)) {
                    return (i, l.clone());
                }
                drop(lines);
                panic!(
                    "the viewer exited ({status}); stderr:\n{}",
                    self.stderr.lock().unwrap().join("\n")
                );
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out; stderr:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for(&mut self, accept: impl Fn(&str) -> bool) -> String {
        self.wait_for_after(0, accept).1
    }

    /// The viewer's stdout so far, once `accept` takes it or the patience runs out.
    fn stdout_once(&self, accept: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let text = self.stdout.lock().unwrap().join("\n");
            if accept(&text) || start.elapsed() >= PATIENCE {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last stderr line after `from` that `accept`s, once no line has come for 1.5 s (for
    /// input the X server may deliver as several events, each drawing a frame: tens of
    /// milliseconds apart on llvmpipe, so 1.5 s leaves room for a loaded machine).
    fn last_after_quiet(&self, from: usize, accept: impl Fn(&str) -> bool) -> String {
        let quiet = Duration::from_millis(1500);
        let mut seen = self.lines_seen();
        let mut since = Instant::now();
        while since.elapsed() < quiet {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.lines_seen();
            if now != seen {
                (seen, since) = (now, Instant::now());
            }
        }
        let lines = self.stderr.lock().unwrap();
        let found = lines.iter().skip(from).rev().find(|l| accept(l));
        found.cloned().expect("a line that the caller has seen")
    }

    fn lines_seen(&self) -> usize {
        self.stderr.lock().unwrap().len()
    }

    /// Press `key` and wait for the frame that shows a state `accept`ed in its `drawn` line.
    fn key(&mut self, x: &Xvfb, key: &str, accept: impl Fn(&str) -> bool) -> String {
        let from = self.lines_seen();
        x.run("xdotool", &["key", key]);
        self.wait_for_after(from, |l| {
            l.starts_with("deepmerge view: drawn") && accept(l)
        })
        .1
    }

    /// The window as RGB bytes, row-major.
    fn screenshot(&self, x: &Xvfb, keep: Option<&Path>) -> (u32, u32, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shot.png");
        // PNG24: ImageMagick would otherwise pick grey or palette PNGs for plain windows.
        let target = format!("PNG24:{}", path.display());
        x.run("import", &["-window", &self.window, &target]);
        if let Some(keep) = keep {
            std::fs::copy(&path, keep).unwrap();
        }
        let mut decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
        decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let channels = info.color_type.samples();
        assert!(channels >= 3, "import wrote a {:?} PNG", info.color_type);
        let rgb = buf[..info.buffer_size()]
            .chunks(channels)
            .flat_map(|px| [px[0], px[1], px[2]])
            .collect();
        (info.width, info.height, rgb)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number after `key` in a `drawn` line, e.g. `origin (`.
fn parse_after(line: &str, key: &str) -> String {
    let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
    line[at..]
        .split([' ', ',', ')', ']'])
        .next()
        .unwrap()
        .to_string()
}

fn origin_of(line: &str) -> (f64, f64) {
    let x = parse_after(line, "origin (").parse().unwrap();
    let rest = &line[line.find("origin (").unwrap()..];
    let y = parse_after(rest, ", ").parse().unwrap();
    (x, y)
}

fn pixel_rgb(shot: &(u32, u32, Vec<u8>), at: (i64, i64)) -> [u8; 3] {
    let (w, h, rgb) = shot;
    assert!(
        at.0 >= 0 && at.1 >= 0 && at.0 < *w as i64 && at.1 < *h as i64,
        "{at:?} off the window"
    );
    let i = (at.1 as usize * *w as usize + at.0 as usize) * 3;
    [rgb[i], rgb[i + 1], rgb[i + 2]]
}

fn close(a: [u8; 3], b: [u8; 3], tolerance: u8) -> bool {
    a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= tolerance)
}

fn flat_channel<'a>(flat: &'a FlatImage, name: &str) -> &'a [f32] {
    match &flat
        .channels
        .iter()
        .find(|c| c.name == name)
        .unwrap()
        .values
    {
        FlatValues::F32(v) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn load_layers(files: &[PathBuf]) -> Loaded {
    let request = LoadRequest {
        files: files.to_vec(),
        read: ReadOptions::default(),
        merge: MergeOptions::default(),
    };
    let result = Mutex::new(None);
    let layers = Mutex::new(Vec::new());
    load(&request, &|event| match event {
        LoadEvent::Layer(layer) => layers.lock().unwrap().push(*layer),
        LoadEvent::Done(r) => *result.lock().unwrap() = Some(r),
        LoadEvent::Progress(..) | LoadEvent::Cloud(..) => {}
    });
    let loaded = result.into_inner().unwrap().unwrap();
    let mut loaded = (*loaded).unwrap_or_else(|e| panic!("{e}"));
    loaded.layers = layers.into_inner().unwrap();
    assert_eq!(loaded.layers.len(), files.len() + 1);
    loaded
}

#[test]
fn the_window_draws_what_the_merge_computes() {
    require("xdotool", &["version"]);
    require("import", &["-version"]);
    let files = inputs();
    let images: Vec<DeepImage> = files
        .iter()
        .map(|f| read_deep(f, &ReadOptions::default()).unwrap())
        .collect();
    let refs: Vec<&DeepImage> = images.iter().collect();
    let MergeOutput::Flat(flat) = merge_images(
        &refs,
        &MergeOptions {
            output: OutputKind::Flat { z: false },
            ..MergeOptions::default()
        },
    )
    .unwrap() else {
        panic!("flat merge gave deep output")
    };
    let loaded = load_layers(&files);
    let merged = &loaded.layers[0];
    let window = merged.data_window;
    assert_eq!(flat.data_window, window);
    let (r, g, b, a) = (
        flat_channel(&flat, "R"),
        flat_channel(&flat, "G"),
        flat_channel(&flat, "B"),
        flat_channel(&flat, "A"),
    );

    let x = Xvfb::start();
    let mut viewer = Viewer::start(&x, &files);
    let first = viewer.wait_for(|l| l.starts_with("deepmerge view: drawn"));
    assert!(first.contains("view composite"), "{first}");
    let title = x.run("xdotool", &["getwindowname", &viewer.window]);
    for f in ["Balls.exr", "Leaves.exr", "Trunks.exr"] {
        assert!(title.contains(f) && title.contains("deepmerge"), "{title}");
    }

    // 1:1, so each image pixel is one window pixel at a known place.
    let line = viewer.key(&x, "equal", |l| l.contains("zoom 1 "));
    let origin = origin_of(&line);
    let d0 = (
        merged.display_window.x0 as i64,
        merged.display_window.y0 as i64,
    );
    let at = |px: (i32, i32)| {
        (
            origin.0 as i64 + px.0 as i64 - d0.0,
            origin.1 as i64 + px.1 as i64 - d0.1,
        )
    };
    let image_width = WINDOW.0 as i64 - deepmerge::view::ui::PANEL_WIDTH as i64;
    let visible = |px: (i32, i32)| {
        let (wx, wy) = at(px);
        (4..image_width - 4).contains(&wx) && (4..WINDOW.1 as i64 - 4).contains(&wy)
    };
    // Known pixels: visible ones spread over the frame, covered and empty alike.
    let mut probes: Vec<(i32, i32)> = Vec::new();
    for gy in 1..8 {
        for gx in 1..10 {
            let px = (
                window.x0 + (window.width() as i32 * gx) / 10,
                window.y0 + (window.height() as i32 * gy) / 8,
            );
            if visible(px) {
                probes.push(px);
            }
        }
    }
    assert!(probes.len() >= 20, "{probes:?}");
    let index = |px: (i32, i32)| window.index_of(px.0, px.1).unwrap();
    let covered = probes.iter().filter(|&&p| a[index(p)] > 0.5).count();
    assert!(covered >= 5, "too few probes hit something: {probes:?}");

    let shot = viewer.screenshot(
        &x,
        std::env::var_os("DEEPMERGE_VIEW_SHOTS")
            .map(|d| PathBuf::from(d).join("composite.png"))
            .as_deref(),
    );
    for &px in &probes {
        let i = index(px);
        let want = [r[i], g[i], b[i]].map(|v| display_byte(v, 0.0));
        let got = pixel_rgb(&shot, at(px));
        assert!(
            close(got, want, 2),
            "composite at {px:?}: drawn {got:?}, the merge gives {want:?}"
        );
    }

    // Click a covered pixel: it is pinned, and its table (copied to stdout) is info's.
    let target = *probes.iter().find(|&&p| a[index(p)] > 0.5).unwrap();
    let from = viewer.lines_seen();
    let (wx, wy) = at(target);
    x.run(
        "xdotool",
        &[
            "mousemove",
            "--window",
            &viewer.window,
            &wx.to_string(),
            &wy.to_string(),
            "click",
            "1",
        ],
    );
    let (_, pinned) = viewer.wait_for_after(from, |l| l.starts_with("deepmerge view: pinned"));
    assert_eq!(
        pinned,
        format!("deepmerge view: pinned pixel ({}, {})", target.0, target.1)
    );
    let from = viewer.lines_seen();
    x.run("xdotool", &["key", "t"]);
    viewer.wait_for_after(from, |l| l.starts_with("deepmerge view: copied"));
    let info = Command::new(binary())
        .arg("info")
        .args(&files)
        .args(["--pixel", &format!("{},{}", target.0, target.1)])
        .output()
        .unwrap();
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let info = String::from_utf8(info.stdout).unwrap();
    // `info` adds a line saying why a part has no samples at a pixel outside its data
    // window; the viewer's table has no such line (its window shows the data windows).
    let mut wanted: Vec<String> = info
        .split("\n\n")
        .map(|section| {
            section
                .lines()
                .filter(|l| !l.contains("is outside this part's data window"))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect();
    wanted.push(format!("pixel ({}, {}) of merged", target.0, target.1));
    // The table goes to stdout before the "copied" line goes to stderr, but the two pipes are
    // read by separate threads: wait for stdout to hold it all rather than race its reader.
    let copied = viewer.stdout_once(|copied| wanted.iter().all(|w| copied.contains(w.as_str())));
    for section in &wanted {
        assert!(
            copied.contains(section.as_str()),
            "info's section\n{section}\nis not in the viewer's table\n{copied}"
        );
    }

    // The heatmap: the paper's bins of the samples each pixel holds.
    viewer.key(&x, "h", |l| l.contains("view heatmap"));
    let shot = viewer.screenshot(&x, None);
    for &px in &probes {
        let p = index(px);
        let want = heat_colour(
            merged
                .slice_pixel(p, f32::NEG_INFINITY, f32::INFINITY)
                .count,
        );
        let held = (merged.offsets[p + 1] - merged.offsets[p]) as usize;
        assert_eq!(want, heat_colour(held));
        let got = pixel_rgb(&shot, at(px));
        assert!(
            close(got, want, 1),
            "heatmap at {px:?}: drawn {got:?}, want {want:?}"
        );
    }

    // A depth slice: the near plane five steps back; only what lies behind it is counted and
    // composited (checked against the host twin of the slice pass).
    let mut slice = deepmerge::view::state::Slice::default();
    for _ in 0..5 {
        slice.move_near(1.0, merged.depth_range);
        let expected = format!("slice {} ", slice.describe());
        viewer.key(&x, "n", |l| l.contains(&expected));
    }
    let near = slice.near;
    assert!(
        near > merged.depth_range.0 && near < merged.depth_range.1,
        "{near}"
    );
    let keep = std::env::var_os("DEEPMERGE_VIEW_SHOTS")
        .map(|d| PathBuf::from(d).join("heatmap_slice.png"));
    let shot = viewer.screenshot(&x, keep.as_deref());
    let mut differs = 0;
    for &px in &probes {
        let p = index(px);
        let sliced = merged.slice_pixel(p, near, f32::INFINITY);
        let whole = merged.slice_pixel(p, f32::NEG_INFINITY, f32::INFINITY);
        differs += usize::from(sliced.count != whole.count);
        let want = heat_colour(sliced.count);
        let got = pixel_rgb(&shot, at(px));
        assert!(
            close(got, want, 1),
            "sliced heatmap at {px:?} (near {near}): drawn {got:?}, want {want:?}"
        );
    }
    assert!(
        differs > 0,
        "the slice at {near} changed no probe; the test would not see a wrong slice"
    );
    viewer.key(&x, "c", |l| l.contains("view composite"));
    let shot = viewer.screenshot(&x, None);
    let columns = &merged.columns.names;
    let col = |n: &str| columns.iter().position(|c| c == n).unwrap();
    for &px in &probes {
        let sliced = merged.slice_pixel(index(px), near, f32::INFINITY);
        let want = [col("R"), col("G"), col("B")].map(|k| display_byte(sliced.values[k], 0.0));
        let got = pixel_rgb(&shot, at(px));
        assert!(
            close(got, want, 2),
            "sliced composite at {px:?}: drawn {got:?}, want {want:?}"
        );
    }

    // Fit, wheel zoom about the cursor, drag to pan: the camera the window reports is the
    // library's camera after the same moves.
    use deepmerge::view::camera::{Area, Camera};
    let area = Area {
        width: WINDOW.0 as f64 - deepmerge::view::ui::PANEL_WIDTH as f64,
        height: WINDOW.1 as f64,
    };
    let frame = (
        merged.display_window.width(),
        merged.display_window.height(),
    );
    let mut camera = Camera::fit(frame, area);
    let line = viewer.key(&x, "f", |l| l.contains(&format!("zoom {} ", camera.zoom)));
    assert_eq!(
        origin_of(&line),
        (camera.origin[0], camera.origin[1]),
        "{line}"
    );
    let from = viewer.lines_seen();
    x.run(
        "xdotool",
        &[
            "mousemove",
            "--window",
            &viewer.window,
            "300",
            "250",
            "click",
            "4",
        ],
    );
    // One notch is a factor 1.25; an X server may deliver a click as more than one notch, a
    // frame each, so the zoom is read from the last frame once the window has gone quiet.
    let fitted = camera;
    viewer.wait_for_after(from, |l| {
        l.starts_with("deepmerge view: drawn") && !l.contains(&format!("zoom {} ", fitted.zoom))
    });
    let line = viewer.last_after_quiet(from, |l| l.starts_with("deepmerge view: drawn"));
    let zoom: f64 = parse_after(&line, "zoom ").parse().unwrap();
    let notches = (zoom / fitted.zoom).ln() / 1.25f64.ln();
    assert!(
        notches >= 0.999 && (notches - notches.round()).abs() < 1e-6,
        "{line}"
    );
    camera.zoom_about([300.0, 250.0], zoom / fitted.zoom);
    let (ox, oy) = origin_of(&line);
    // The image point under the cursor stayed under it.
    assert!(
        (ox - camera.origin[0]).abs() < 1e-6 && (oy - camera.origin[1]).abs() < 1e-6,
        "{line}"
    );
    let from = viewer.lines_seen();
    x.run(
        "xdotool",
        &[
            "mousedown",
            "1",
            "mousemove",
            "--window",
            &viewer.window,
            "360",
            "290",
            "mouseup",
            "1",
        ],
    );
    // From the origin the window reported (the model agrees within 1e-6, not always to the
    // last bit, and a string match of the next origin would then wait forever).
    camera.origin = [ox, oy];
    camera.pan([60.0, 40.0]);
    let want = camera.origin;
    viewer.wait_for_after(from, |l| {
        l.starts_with("deepmerge view: drawn") && l.contains(" origin (") && {
            let (x, y) = origin_of(l);
            (x - want[0]).abs() < 1e-6 && (y - want[1]).abs() < 1e-6
        }
    });

    // What a slice change cost, as the window measured it (input event to finished frame).
    let times: Vec<String> = viewer
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("shown in"))
        .cloned()
        .collect();
    eprintln!("{}", times.join("\n"));
    assert!(!times.is_empty());
    x.run("xdotool", &["key", "q"]);
    let status = wait_exit(&mut viewer.child);
    assert!(status.success(), "closing the window: {status}");
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(start.elapsed() < PATIENCE, "the viewer did not close");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_input_is_one_line_in_the_window_and_on_stderr() {
    require("xdotool", &["version"]);
    let dir = tempfile::tempdir().unwrap();
    // A sound header over a bad sample (a NaN depth): the checks before the window pass, the
    // load finds it. A deterministic error (a truncated file's names whichever damaged chunk a
    // parallel decode meets first, in the CLI too); files the header already refuses never
    // open a window (the test after the next).
    let bad = dir.path().join("nan-depth.exr");
    let mut image = read_deep(&inputs()[0], &ReadOptions::default()).unwrap();
    let z = image.channels.iter().position(|c| c.name == "Z").unwrap();
    match &mut image.planes[z] {
        deepmerge::deep::Plane::F32(v) => {
            let middle = v.len() / 2;
            v[middle] = f32::NAN;
        }
        _ => panic!("Balls.exr's Z is not a float channel"),
    }
    deepmerge::exr::write_deep(&bad, &image, deepmerge::exr::Codec::Zips).unwrap();
    let cli = Command::new(binary())
        .args([bad.as_os_str()])
        .arg(&inputs()[1])
        .args(["-o", dir.path().join("out.exr").to_str().unwrap()])
        .output()
        .unwrap();
    let cli_error: Vec<String> = String::from_utf8_lossy(&cli.stderr)
        .lines()
        .filter(|l| l.starts_with("deepmerge: error:"))
        .map(str::to_string)
        .collect();
    assert_eq!(cli_error.len(), 1, "{cli:?}");

    let x = Xvfb::start();
    let mut viewer = Viewer::start(&x, &[bad.clone(), inputs()[1].clone()]);
    let shown = viewer.wait_for(|l| l.starts_with("deepmerge: error:"));
    assert_eq!(shown, cli_error[0]);
    assert!(!viewer
        .stderr
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("panicked")));
    // The window says it too: its title, and red text in the image area (the title is set
    // after the error line is printed: read it once the error is drawn).
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn the error"));
    let title = x.run("xdotool", &["getwindowname", &viewer.window]);
    assert!(title.contains("error"), "{title}");
    let shot = viewer.screenshot(&x, None);
    let red = shot
        .2
        .chunks(3)
        .filter(|p| p[0] > 200 && p[1] < 140 && p[2] < 140)
        .count();
    assert!(red > 50, "no error text drawn");
    x.run("xdotool", &["key", "q"]);
    let status = wait_exit(&mut viewer.child);
    assert_eq!(status.code(), Some(1));
}

#[test]
fn info_pixel_prints_the_inspector_table_of_every_deep_part() {
    use deepmerge::exr::PartSelector;
    use deepmerge::inspect::{input_title, PixelTable, TableValues};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr-images");
    let multipart = dir.join("Stereo-Trunks-multipart.exr");
    let info = |args: &[&str]| {
        let out = Command::new(binary())
            .arg("info")
            .arg(&multipart)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A pixel with samples in both parts: the table is the library's, part by part.
    let table = |part: usize, mode| {
        let image = read_deep(
            &multipart,
            &ReadOptions {
                part: PartSelector::Index(part),
                ..ReadOptions::default()
            },
        )
        .unwrap();
        let p = (0..image.pixel_count())
            .find(|&p| image.count(p) >= 2)
            .unwrap();
        let (x, y) = image.data_window.coords_of(p);
        let title = input_title(&multipart, Some(part));
        (
            (x, y),
            PixelTable::of_input(&title, &image, 0, (x, y), mode).unwrap(),
        )
    };
    let ((x, y), part0) = table(0, TableValues::Raw);
    assert!(part0.rows.len() >= 2);
    let pixel = format!("{x},{y}");
    let (code, out, err) = info(&["--pixel", &pixel]);
    assert_eq!(code, Some(0), "{err}");
    let sections: Vec<&str> = out.split("\n\n").collect();
    assert_eq!(sections.len(), 2, "{out}");
    assert_eq!(sections[0].trim_end(), part0.to_text().trim_end());
    assert!(
        sections[1].starts_with(&format!(
            "pixel ({x}, {y}) of {} part 1:",
            multipart.display()
        )),
        "{out}"
    );
    let (code, out, _) = info(&["--pixel", &pixel, "--part", "0", "--accumulated"]);
    assert_eq!(code, Some(0));
    let image = read_deep(&multipart, &ReadOptions::default()).unwrap();
    let accumulated = PixelTable::of_input(
        &input_title(&multipart, Some(0)),
        &image,
        0,
        (x, y),
        TableValues::Accumulated,
    )
    .unwrap();
    assert_eq!(out, accumulated.to_text());
    // The last accumulated row is the flat merge of the part on its own.
    let MergeOutput::Flat(flat) = merge_images(&[&image], &MergeOptions::default()).unwrap() else {
        panic!("flat merge gave deep output")
    };
    let a = flat_channel(&flat, "A")[flat.data_window.index_of(x, y).unwrap()];
    let alpha = accumulated.alpha_column.unwrap();
    assert_eq!(accumulated.rows.last().unwrap().values[alpha].as_f32(), a);
    // Malformed pixels are usage errors, on one line.
    let (code, _, err) = info(&["--pixel", "12"]);
    assert_eq!(code, Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn without_a_display_the_viewer_fails_on_one_line() {
    let out = Command::new(binary())
        .arg("view")
        .arg(&inputs()[0])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    // One line that says what to do, without winit's source path or its Wayland advice (the
    // Wayland backend is not built in).
    assert_eq!(
        err,
        "deepmerge: error: OpenGL: cannot open a window: no X display (DISPLAY is not set); set DISPLAY or run under xvfb-run\n"
    );
}

/// The sliced image a GPU layer computes for `near`..`far`, read back.
fn gpu_slice(ctx: &GlContext, gpu: &GpuLayer, near: f32, far: f32) -> Vec<f32> {
    gpu.slice(ctx, near, far).unwrap();
    gpu.read_sliced(ctx).unwrap()
}

#[test]
fn a_layer_split_into_bands_slices_as_one_buffer_and_as_the_host_twin() {
    let loaded = load_layers(&inputs());
    let merged = &loaded.layers[0];
    let ctx = GlContext::new_with(true).unwrap();
    let whole_plan = plan_layer(&ctx, merged).unwrap();
    assert_eq!(whole_plan.bands.len(), 1, "the test layer fits one buffer");
    let whole = GpuLayer::upload(&ctx, &mut merged.clone(), &whole_plan).unwrap();

    // A driver that binds far less than it claims: the layer is planned again in bands.
    let limit = 1 << 20;
    ctx.limit_storage_block(Some(limit));
    let plan = plan_layer(&ctx, merged).unwrap();
    assert!(plan.bands.len() >= 4, "{} bands", plan.bands.len());
    let (width, stride) = (merged.data_window.width(), merged.stride());
    let mut next = (0, 0);
    for band in &plan.bands {
        assert_eq!((band.row0, band.sample0), next, "bands leave no gap");
        assert!(band.rows > 0);
        assert!(band
            .buffer_bytes(width, stride, merged.id_stride())
            .iter()
            .all(|&b| b <= limit));
        next = (band.row0 + band.rows, band.sample0 + band.samples);
    }
    assert_eq!(next, (merged.data_window.height(), merged.samples()));
    let mut moved = merged.clone();
    let split = GpuLayer::upload(&ctx, &mut moved, &plan).unwrap();
    assert_eq!(split.bands(), plan.bands.len());
    assert!(moved.depths.is_empty() && moved.values.is_empty() && moved.offsets.is_empty());
    assert_eq!(moved.samples(), merged.samples());

    let mid = (merged.depth_range.0 + merged.depth_range.1) / 2.0;
    let per_pixel = stride + 2;
    for (near, far) in [
        (f32::NEG_INFINITY, f32::INFINITY),
        (mid, f32::INFINITY),
        (f32::NEG_INFINITY, mid),
    ] {
        let one = gpu_slice(&ctx, &whole, near, far);
        let bands = gpu_slice(&ctx, &split, near, far);
        assert_eq!(one.len(), merged.pixels() * per_pixel);
        // The same shader over the same samples: bit for bit (NaN fronts compared as bits).
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert!(bits(&one) == bits(&bands), "[{near}, {far}]: bands differ");
        let mut inside = 0;
        for p in 0..merged.pixels() {
            let want = merged.slice_pixel(p, near, far);
            let got = &bands[p * per_pixel..(p + 1) * per_pixel];
            assert_eq!(
                got[stride + 1] as usize,
                want.count,
                "pixel {p} [{near}, {far}]"
            );
            inside += want.count;
            for (c, (&g, &w)) in got.iter().zip(&want.values).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "pixel {p} column {c} [{near}, {far}]: GPU {g}, host {w}"
                );
            }
            match want.front {
                Some(z) => assert_eq!(got[stride], z, "front of pixel {p}"),
                None => assert!(got[stride].is_nan(), "front of pixel {p}"),
            }
        }
        assert!(
            inside > 0,
            "[{near}, {far}] holds no sample: the test would not see a bad band"
        );
    }
    whole.delete(&ctx);
    split.delete(&ctx);

    // A storage block that cannot hold one row: one line that says so.
    ctx.limit_storage_block(Some(64));
    let e = plan_layer(&ctx, merged).expect_err("one row does not fit 64 bytes");
    let message = e.to_string();
    assert!(
        message.contains("more than GL_MAX_SHADER_STORAGE_BLOCK_SIZE (64)")
            && message.ends_with("bands of single rows do not fit either")
            && !message.contains('\n'),
        "{message}"
    );
}

#[test]
fn a_window_on_banded_layers_draws_the_merge() {
    require("xdotool", &["version"]);
    require("import", &["-version"]);
    let files = inputs();
    let images: Vec<DeepImage> = files
        .iter()
        .map(|f| read_deep(f, &ReadOptions::default()).unwrap())
        .collect();
    let refs: Vec<&DeepImage> = images.iter().collect();
    let MergeOutput::Flat(flat) = merge_images(
        &refs,
        &MergeOptions {
            output: OutputKind::Flat { z: false },
            ..MergeOptions::default()
        },
    )
    .unwrap() else {
        panic!("flat merge gave deep output")
    };
    let window = flat.data_window;
    let (r, g, b) = (
        flat_channel(&flat, "R"),
        flat_channel(&flat, "G"),
        flat_channel(&flat, "B"),
    );
    let x = Xvfb::start();
    let mut viewer = Viewer::start_with(&x, &files, &["--storage-block-limit", "1048576"]);
    let uploaded =
        viewer.wait_for(|l| l.starts_with("deepmerge view: layer 0 (merged) on the GPU"));
    let bands: usize = parse_after(&uploaded, " in ").parse().unwrap();
    assert!(bands >= 4, "{uploaded}");
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn"));
    let line = viewer.key(&x, "equal", |l| l.contains("zoom 1 "));
    let origin = origin_of(&line);
    let d0 = (flat.display_window.x0 as i64, flat.display_window.y0 as i64);
    let at = |px: (i32, i32)| {
        (
            origin.0 as i64 + px.0 as i64 - d0.0,
            origin.1 as i64 + px.1 as i64 - d0.1,
        )
    };
    let image_width = WINDOW.0 as i64 - deepmerge::view::ui::PANEL_WIDTH as i64;
    let shot = viewer.screenshot(&x, None);
    // Every visible row of a column through the image: band edges included.
    let mut checked = 0;
    for gx in 1..6 {
        let px_x = window.x0 + (window.width() as i32 * gx) / 6;
        for y in window.y0..=window.y1 {
            let (wx, wy) = at((px_x, y));
            if !((0..image_width).contains(&wx) && (0..WINDOW.1 as i64).contains(&wy)) {
                continue;
            }
            let i = window.index_of(px_x, y).unwrap();
            let want = [r[i], g[i], b[i]].map(|v| display_byte(v, 0.0));
            let got = pixel_rgb(&shot, (wx, wy));
            assert!(
                close(got, want, 2),
                "composite at ({px_x}, {y}): drawn {got:?}, the merge gives {want:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} pixels checked");
    x.run("xdotool", &["key", "q"]);
    assert!(wait_exit(&mut viewer.child).success());
}

/// The `deepmerge: error:` lines of `command`'s stderr, with its exit code.
fn error_lines(command: &mut Command) -> (Option<i32>, Vec<String>, String) {
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = stderr
        .lines()
        .filter(|l| l.starts_with("deepmerge: error:"))
        .map(str::to_string)
        .collect();
    (out.status.code(), lines, stderr)
}

#[test]
fn the_viewer_refuses_bad_inputs_with_the_cli_lines_before_a_window_opens() {
    let x = Xvfb::start();
    let dir = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let flat = data.join("oiio/deepalpha-flat-oiiotool.exr");
    let missing = dir.path().join("missing.exr");
    let good = inputs()[0].clone();
    for bad in [flat, missing] {
        let (cli_code, cli, _) = error_lines(
            Command::new(binary())
                .arg(&bad)
                .arg(&good)
                .arg("-o")
                .arg(dir.path().join("out.exr")),
        );
        assert_eq!((cli_code, cli.len()), (Some(1), 1), "{cli:?}");
        let (code, lines, stderr) = error_lines(
            x.command(binary())
                .arg("view")
                .arg(&good)
                .arg(&bad)
                .env("DISPLAY", &x.display),
        );
        assert_eq!(code, Some(1), "{stderr}");
        // Exactly the CLI's line, and nothing else: no window was opened.
        assert_eq!(stderr.lines().collect::<Vec<_>>(), cli, "{stderr}");
        assert_eq!(lines, cli);
    }

    // Ten inputs: the viewer says how many it takes.
    let (code, lines, stderr) = error_lines(
        x.command(binary())
            .arg("view")
            .args(std::iter::repeat_n(&good, 10)),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        lines[0].contains("takes 1 to 9 inputs") && lines[0].contains("not 10"),
        "{stderr}"
    );
}

#[test]
fn layers_beyond_the_gpu_memory_budget_are_one_line_in_the_window_and_on_stderr() {
    require("xdotool", &["version"]);
    let x = Xvfb::start();
    let files = inputs();
    let loaded = load_layers(&files);
    let ctx = GlContext::new_with(true).unwrap();
    let merged_bytes = plan_layer(&ctx, &loaded.layers[0]).unwrap().bytes;
    drop(ctx);
    // Room for the merge but not for the merge and the first input.
    let budget_gib = (merged_bytes + 1024) as f64 / (1u64 << 30) as f64;
    let mut viewer = Viewer::start_with(&x, &files, &["--gpu-memory", &budget_gib.to_string()]);
    let shown = viewer.wait_for(|l| l.starts_with("deepmerge: error:"));
    assert!(
        shown.starts_with("deepmerge: error: OpenGL: the Balls.exr layer needs ")
            && shown.contains("more than the GPU memory budget of")
            && shown.ends_with("raise --gpu-memory, or view fewer inputs"),
        "{shown}"
    );
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn the error"));
    let title = x.run("xdotool", &["getwindowname", &viewer.window]);
    assert!(title.contains("error"), "{title}");
    x.run("xdotool", &["key", "q"]);
    assert_eq!(wait_exit(&mut viewer.child).code(), Some(1));
    let errors = viewer
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("deepmerge: error:"))
        .count();
    assert_eq!(errors, 1);
}

/// A tidy test image of `side`x`side` pixels whose every pixel holds three samples with ids
/// from a seeded generator (edge values in the first pixels' visible samples): a point at Z 1 with alpha 0 (no view may show
/// its id), a point at Z 2 with alpha 0.5 and a volume from 3 to 5 with alpha 0.5; `id` is a
/// uint channel and `objectId` a float one holding the same ids below 2^24 as whole numbers,
/// and a fraction (no id) in every seventh pixel.
fn id_test_image(side: usize) -> DeepImage {
    use deepmerge::deep::{Bounds, Channel, Plane, SampleType};
    let window = Bounds {
        x0: 0,
        y0: 0,
        x1: side as i32 - 1,
        y1: side as i32 - 1,
    };
    let channels = vec![
        Channel::new("A", SampleType::F32),
        Channel::new("Z", SampleType::F32),
        Channel::new("ZBack", SampleType::F32),
        Channel::new("id", SampleType::U32),
        Channel::new("objectId", SampleType::F32),
    ];
    let mut image = DeepImage::empty(window, window, channels);
    let edges = [1u32, 2, u32::MAX, 1 << 31, (1 << 24) + 1, 3_236_172_513, 0];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        // SplitMix64: a fixed seed, so a failure names the same ids every run.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    };
    let (mut a, mut z, mut zback, mut id, mut object) = (vec![], vec![], vec![], vec![], vec![]);
    for p in 0..side * side {
        for (k, (front, back, alpha)) in [(1.0, 1.0, 0.0), (2.0, 2.0, 0.5), (3.0, 5.0, 0.5)]
            .into_iter()
            .enumerate()
        {
            let value = if k > 0 && p < edges.len() {
                edges[p]
            } else {
                next()
            };
            a.push(alpha);
            z.push(front);
            zback.push(back);
            id.push(value);
            let whole = (value & 0xff_ffff) as f32;
            object.push(if p % 7 == 3 { whole + 0.5 } else { whole });
        }
    }
    image.offsets = (0..=side * side).map(|p| 3 * p as u64).collect();
    image.planes = vec![
        Plane::F32(a),
        Plane::F32(z),
        Plane::F32(zback),
        Plane::U32(id),
        Plane::F32(object),
    ];
    image
}

/// Draw `gpu` in `view` at 1:1 into an offscreen `side`x`side` framebuffer on the headless
/// context and read it back as RGB bytes, top row first.
fn draw_offscreen(
    ctx: &GlContext,
    gpu: &GpuLayer,
    layer: &deepmerge::view::load::Layer,
    view: deepmerge::view::state::View,
    slice: (f32, f32),
) -> Vec<[u8; 3]> {
    use deepmerge::view::gpu::DrawParams;
    use deepmerge::view::state::View;
    use glow::HasContext;
    let (w, h) = (
        layer.data_window.width() as i32,
        layer.data_window.height() as i32,
    );
    gpu.slice(ctx, slice.0, slice.1).unwrap();
    let gl = &ctx.gl;
    let mut rgba = vec![0u8; (w * h * 4) as usize];
    // SAFETY: objects made, used and deleted on the current headless context.
    unsafe {
        let vao = gl.create_vertex_array().unwrap();
        let colour = gl.create_renderbuffer().unwrap();
        gl.bind_renderbuffer(glow::RENDERBUFFER, Some(colour));
        gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, w, h);
        let fbo = gl.create_framebuffer().unwrap();
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
        gl.framebuffer_renderbuffer(
            glow::FRAMEBUFFER,
            glow::COLOR_ATTACHMENT0,
            glow::RENDERBUFFER,
            Some(colour),
        );
        assert_eq!(
            gl.check_framebuffer_status(glow::FRAMEBUFFER),
            glow::FRAMEBUFFER_COMPLETE
        );
        let d = layer.display_window;
        let params = DrawParams {
            window: (w as u32, h as u32),
            image_width: w as u32,
            origin: [0.0, 0.0],
            zoom: 1.0,
            display_window: [d.x0, d.y0, d.x1, d.y1],
            data_window: [d.x0, d.y0, d.x1, d.y1],
            view: view.shader_id(),
            rgba: [-1, -1, -1, 0],
            channel: -1,
            id_channel: match view {
                View::Id(k) => k as i32,
                _ => -1,
            },
            exposure: 0.0,
            depth_range: layer.depth_range,
            pinned: None,
            slice,
        };
        gpu.draw(ctx, vao, &params).unwrap();
        gl.read_pixels(
            0,
            0,
            w,
            h,
            glow::RGBA,
            glow::UNSIGNED_BYTE,
            glow::PixelPackData::Slice(Some(&mut rgba)),
        );
        gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        gl.delete_framebuffer(fbo);
        gl.delete_renderbuffer(colour);
        gl.delete_vertex_array(vao);
    }
    // GL's rows run bottom-up.
    (0..h)
        .rev()
        .flat_map(|row| {
            let line = &rgba[(row * w * 4) as usize..((row + 1) * w * 4) as usize];
            line.chunks(4)
                .map(|px| [px[0], px[1], px[2]])
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_id_view_draws_the_host_twins_colour_of_the_slices_front_id_for_many_ids() {
    use deepmerge::view::display::id_colour;
    use deepmerge::view::load::layer_of;
    use deepmerge::view::state::View;
    let side = 128;
    let image = id_test_image(side);
    let layer = layer_of("ids", &image).unwrap();
    assert_eq!(layer.id_names, ["id", "objectId"]);
    let ctx = GlContext::new_with(true).unwrap();
    let plan = plan_layer(&ctx, &layer).unwrap();
    let gpu = GpuLayer::upload(&ctx, &mut layer.clone(), &plan).unwrap();
    let inf = f32::INFINITY;
    // Whole: the point at 2 (the alpha-0 point in front never shows); near 4: the volume's
    // back half; far 1.5: only the alpha-0 point, so no id (black).
    for (slice, sample) in [
        ((-inf, inf), Some(1)),
        ((4.0, inf), Some(2)),
        ((-inf, 1.5), None),
    ] {
        for k in 0..2 {
            let drawn = draw_offscreen(&ctx, &gpu, &layer, View::Id(k), slice);
            let mut distinct = std::collections::HashSet::new();
            assert_eq!(drawn.len(), side * side);
            for (p, &got) in drawn.iter().enumerate() {
                let id = layer.front_id(p, slice.0, slice.1, k);
                // The host twin picks the sample the slice's front comes from.
                let want_id = sample.map_or(0, |s| {
                    let held = image.planes[3 + k].clone();
                    deepmerge::ops::idselect::id_at(&held, 3 * p + s).unwrap_or(0)
                });
                assert_eq!(id, want_id, "pixel {p} slice {slice:?} channel {k}");
                assert_eq!(
                    got,
                    id_colour(id),
                    "pixel {p} (id {id}) slice {slice:?} channel {k}: the GPU's colour differs from id_colour's"
                );
                distinct.insert(id);
            }
            if sample.is_some() {
                // Many ids, the edge values among them, and float ids that are no id.
                assert!(
                    distinct.len() > side * side * 3 / 4,
                    "{} ids",
                    distinct.len()
                );
                assert!(distinct.contains(&0));
                if k == 0 {
                    for edge in [1u32, u32::MAX, 1 << 31, 3_236_172_513] {
                        assert!(distinct.contains(&edge), "{edge} not drawn");
                    }
                }
            } else {
                assert_eq!(distinct.len(), 1);
            }
        }
    }
    gpu.delete(&ctx);
}

#[test]
fn the_id_view_of_an_id_carrying_render_shows_the_front_ids_colours() {
    use deepmerge::view::display::id_colour;
    require("xdotool", &["version"]);
    require("import", &["-version"]);
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    // A render with uint ids (id, particleid) over a file without any: the merge has both.
    let files = vec![
        data.join("openexr/multivariate.deep.exr"),
        data.join("openexr-images/Balls.exr"),
    ];
    let loaded = load_layers(&files);
    let merged = &loaded.layers[0];
    assert_eq!(merged.id_names, ["id", "particleid"]);
    assert!(loaded.layers[2].id_names.is_empty());
    let window = merged.data_window;

    let x = Xvfb::start();
    let mut viewer = Viewer::start(&x, &files);
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn"));
    let line = viewer.key(&x, "equal", |l| l.contains("zoom 1 "));
    let origin = origin_of(&line);
    let d = merged.display_window;
    let at = |px: (i32, i32)| {
        (
            origin.0 as i64 + (px.0 - d.x0) as i64,
            origin.1 as i64 + (px.1 - d.y0) as i64,
        )
    };
    // Every third pixel of the display window (256x256, all of it in the image area).
    let probes: Vec<(i32, i32)> = (d.y0..=d.y1)
        .step_by(3)
        .flat_map(|y| (d.x0..=d.x1).step_by(3).map(move |x| (x, y)))
        .collect();
    let check = |viewer: &Viewer, k: usize, near: f32, what: &str| -> Vec<u32> {
        let shot = viewer.screenshot(&x, None);
        let mut ids = Vec::new();
        for &px in &probes {
            let p = window.index_of(px.0, px.1).unwrap();
            let id = merged.front_id(p, near, f32::INFINITY, k);
            let got = pixel_rgb(&shot, at(px));
            assert!(
                close(got, id_colour(id), 1),
                "{what} at {px:?}: drawn {got:?}, id {id} is {:?}",
                id_colour(id)
            );
            ids.push(id);
        }
        // Different ids in front at different pixels, in different colours: the view tells
        // objects apart.
        let distinct: std::collections::HashSet<u32> =
            ids.iter().copied().filter(|&i| i != 0).collect();
        let colours: std::collections::HashSet<[u8; 3]> =
            distinct.iter().map(|&i| id_colour(i)).collect();
        assert!(distinct.len() >= 3, "{what}: ids {distinct:?}");
        assert_eq!(
            colours.len(),
            distinct.len(),
            "{what}: two ids share a colour"
        );
        ids
    };
    viewer.key(&x, "d", |l| l.contains("view id id "));
    check(&viewer, 0, f32::NEG_INFINITY, "id view of id");
    viewer.key(&x, "d", |l| l.contains("view id particleid "));
    let whole = check(&viewer, 1, f32::NEG_INFINITY, "id view of particleid");
    // A depth slice: the front id is the front-most inside it.
    let mut slice = deepmerge::view::state::Slice::default();
    for _ in 0..5 {
        slice.move_near(1.0, merged.depth_range);
        let expected = format!("slice {} ", slice.describe());
        viewer.key(&x, "n", |l| l.contains(&expected));
    }
    let sliced = check(&viewer, 1, slice.near, "sliced id view of particleid");
    assert!(
        whole.iter().zip(&sliced).any(|(a, b)| a != b),
        "the slice at {} changed no front id; the test would not see a wrong slice",
        slice.near
    );
    // The input without ids: the view falls back to the composite, and the id key says why
    // and changes nothing.
    viewer.key(&x, "2", |l| {
        l.contains("layer 2 (Balls.exr) view composite ")
    });
    let from = viewer.lines_seen();
    x.run("xdotool", &["key", "d"]);
    let (_, said) = viewer.wait_for_after(from, |l| l.contains("has no id channel"));
    assert_eq!(
        said,
        "deepmerge view: layer 2 (Balls.exr) has no id channel (a uint channel, or a half or float one whose name ends in id); the view stays composite"
    );
    // Back to the merge: still the composite (the key changed nothing).
    viewer.key(&x, "0", |l| l.contains("layer 0 (merged) view composite "));
    x.run("xdotool", &["key", "q"]);
    assert!(wait_exit(&mut viewer.child).success());
}

/// The points `deepmerge points FILE` writes: (x, y, z bits, rgba) per point, in file order.
fn ply_points(file: &Path) -> Vec<([u32; 3], [u8; 4])> {
    let dir = tempfile::tempdir().unwrap();
    let ply = dir.path().join("points.ply");
    let out = Command::new(binary())
        .arg("points")
        .arg(file)
        .arg("-o")
        .arg(&ply)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(&ply).unwrap();
    let end = b"end_header\n";
    let body = bytes.windows(end.len()).position(|w| w == end).unwrap() + end.len();
    bytes[body..]
        .chunks_exact(16)
        .map(|r| {
            let f = |k: usize| u32::from_le_bytes(r[4 * k..4 * k + 4].try_into().unwrap());
            ([f(0), f(1), f(2)], [r[12], r[13], r[14], r[15]])
        })
        .collect()
}

/// The cloud the viewer builds of `file` alone, within `budget` bytes.
fn cloud_of(file: &Path, budget: u64) -> deepmerge::view::cloud::PointCloud {
    use deepmerge::view::cloud::{build_cloud, CloudRequest};
    let image = read_deep(file, &ReadOptions::default()).unwrap();
    let layer = deepmerge::view::load::layer_of("layer", &image).unwrap();
    build_cloud(&CloudRequest {
        layer: 1,
        files: vec![file.to_path_buf()],
        inputs: Arc::new(vec![image]),
        which: vec![0],
        read: ReadOptions::default(),
        id_channel: layer.id_names.first().cloned(),
        budget,
    })
    .unwrap()
}

#[test]
fn the_point_cloud_holds_the_points_that_points_writes() {
    use deepmerge::view::cloud::POINT_BYTES;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    // A file with a camera (Arnold's) and one without (pixel coordinates) but with ids.
    for file in [
        data.join("oiio/deepalpha.exr"),
        data.join("openexr/multivariate.deep.exr"),
    ] {
        let ply = ply_points(&file);
        let cloud = cloud_of(&file, u64::MAX);
        assert_eq!(cloud.info.stride, 1);
        assert_eq!(cloud.info.points, ply.len(), "{}", file.display());
        assert_eq!(cloud.info.samples, ply.len() as u64);
        // The same points, bit for bit (the cloud's order is shuffled within its chunks).
        let mut got: Vec<([u32; 3], [u8; 4])> = cloud
            .records
            .iter()
            .map(|r| (r.position.map(f32::to_bits), r.rgba))
            .collect();
        let mut want = ply.clone();
        got.sort_unstable();
        want.sort_unstable();
        assert!(got == want, "{}: the cloud's points differ", file.display());
        // Over the budget: every stride-th of the file's points, and no more than fit.
        let budget = 1000 * POINT_BYTES;
        let small = cloud_of(&file, budget);
        let stride = small.info.stride as usize;
        assert_eq!(stride, ply.len().div_ceil(1000));
        assert!(small.records.len() as u64 * POINT_BYTES <= budget);
        let mut kept: Vec<_> = ply.iter().step_by(stride).copied().collect();
        let mut got: Vec<_> = small
            .records
            .iter()
            .map(|r| (r.position.map(f32::to_bits), r.rgba))
            .collect();
        kept.sort_unstable();
        got.sort_unstable();
        assert!(got == kept, "{}: the strided cloud differs", file.display());
    }
}

/// The window-pixel box of the points of `cloud` seen by `camera` that land in an area of
/// `size`.
fn projected_box(
    cloud: &deepmerge::view::cloud::PointCloud,
    camera: &deepmerge::view::orbit::OrbitCamera,
    size: (f64, f64),
) -> [f64; 4] {
    let mut b = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    for r in &cloud.records {
        match camera.project(r.position.map(f64::from), size) {
            Some([x, y]) if (0.0..size.0).contains(&x) && (0.0..size.1).contains(&y) => {
                b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
            }
            _ => {}
        }
    }
    b
}

/// The box of the image area's pixels that are not its background, and how many there are.
fn drawn_box(shot: &(u32, u32, Vec<u8>), size: (u32, u32)) -> ([f64; 4], usize) {
    let mut b = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    let mut count = 0;
    for y in 0..size.1 as i64 {
        for x in 0..size.0 as i64 {
            if !close(pixel_rgb(shot, (x, y)), [41, 41, 41], 2) {
                let (x, y) = (x as f64, y as f64);
                b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
                count += 1;
            }
        }
    }
    (b, count)
}

#[test]
fn the_points_mode_orbits_zooms_and_colours_the_cloud_as_it_reports() {
    use deepmerge::view::orbit::{OrbitCamera, ORBIT_PER_PIXEL};
    require("xdotool", &["version"]);
    require("import", &["-version"]);
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr/multivariate.deep.exr");
    let cloud = cloud_of(&file, u64::MAX);
    let area = (WINDOW.0 - deepmerge::view::ui::PANEL_WIDTH as u32, WINDOW.1);
    let size = (area.0 as f64, area.1 as f64);
    let x = Xvfb::start();
    let mut viewer = Viewer::start_with(&x, std::slice::from_ref(&file), &["--frame-stats"]);
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn"));
    // Waits for the frame that shows a state `accept`ed, then for a frame holding every pass.
    // Waits for a frame showing a state `accept`ed, then until the window is still: the last
    // state drawn, with a frame holding every pass after it and no change for 300 ms (one
    // wheel click may come as more than one scroll event).
    let settled = |viewer: &mut Viewer, from: usize, accept: &dyn Fn(&str) -> bool| {
        viewer.wait_for_after(from, |l| {
            l.starts_with("deepmerge view: drawn") && accept(l)
        });
        loop {
            let (last, line) = {
                let lines = viewer.stderr.lock().unwrap();
                let (i, l) = lines
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, l)| l.starts_with("deepmerge view: drawn"))
                    .unwrap();
                (i, l.clone())
            };
            viewer.wait_for_after(last, |l| {
                l.starts_with("deepmerge view: frame") && {
                    let p = parse_after(l, "passes ");
                    l.contains(&format!("passes {p} of {p} shown"))
                }
            });
            std::thread::sleep(Duration::from_millis(300));
            let still = !viewer.stderr.lock().unwrap()[last + 1..]
                .iter()
                .any(|l| l.starts_with("deepmerge view: drawn"));
            if still {
                return line;
            }
        }
    };
    let camera_of = |line: &str| {
        let mut c = OrbitCamera::fit(
            cloud.info.basis,
            cloud.info.bounds.0,
            cloud.info.bounds.1,
            size.0 / size.1,
        );
        c.yaw = parse_after(line, "yaw ").parse().unwrap();
        c.pitch = parse_after(line, "pitch ").parse().unwrap();
        c.distance = parse_after(line, "distance ").parse().unwrap();
        c
    };
    // The picture's box is the cloud's through the camera the window reports.
    let check = |viewer: &Viewer, line: &str, what: &str| {
        let keep = std::env::var_os("DEEPMERGE_VIEW_TEST_SHOTS")
            .map(|d| Path::new(&d).join(format!("points-{}.png", what.replace(' ', "-"))));
        let shot = viewer.screenshot(&x, keep.as_deref());
        let (drawn, count) = drawn_box(&shot, area);
        let want = projected_box(&cloud, &camera_of(line), size);
        assert!(count > 1000, "{what}: {count} pixels drawn");
        for k in 0..4 {
            assert!(
                (drawn[k] - want[k]).abs() <= 2.5,
                "{what}: drawn box {drawn:?}, the points project to {want:?}"
            );
        }
        shot
    };

    let from = viewer.lines_seen();
    x.run("xdotool", &["key", "p"]);
    let (_, held) = viewer.wait_for_after(from, |l| {
        l.contains("on the GPU:") && l.contains("points of")
    });
    assert!(
        held.contains(&format!(
            "{} points of {} (every 1 kept)",
            cloud.info.points, cloud.info.points
        )),
        "{held}"
    );
    assert!(held.contains("placed by pixel coordinates"), "{held}");
    let line = settled(&mut viewer, from, &|l| {
        l.contains("points colour depth yaw 0 pitch 0 ")
    });
    let before = check(&viewer, &line, "at rest");

    // A drag right of 100 window pixels, in steps: the cloud turns by 100 ORBIT_PER_PIXEL.
    let (cx, cy) = ((area.0 / 2).to_string(), (area.1 / 2).to_string());
    let from = viewer.lines_seen();
    x.run(
        "xdotool",
        &[
            "mousemove",
            "--window",
            &viewer.window,
            &cx,
            &cy,
            "mousedown",
            "1",
        ],
    );
    for _ in 0..10 {
        x.run("xdotool", &["mousemove_relative", "--", "10", "0"]);
    }
    x.run("xdotool", &["mouseup", "1"]);
    let line = settled(&mut viewer, from, &|l| {
        l.contains("points colour depth yaw ")
            && (parse_after(l, "yaw ").parse::<f64>().unwrap() - 100.0 * ORBIT_PER_PIXEL).abs()
                < 1e-9
    });
    assert!(line.contains(" pitch 0 "), "{line}");
    let turned = check(&viewer, &line, "turned");
    let changed = before
        .2
        .iter()
        .zip(&turned.2)
        .filter(|(a, b)| a != b)
        .count();
    assert!(
        changed > 3000,
        "the orbit changed {changed} bytes of the picture"
    );

    // The wheel: nearer by 1.25 a scroll event (X may send a click as two).
    let distance: f64 = parse_after(&line, "distance ").parse().unwrap();
    let from = viewer.lines_seen();
    x.run("xdotool", &["click", "4"]);
    let line = settled(&mut viewer, from, &|l| {
        l.contains("points colour depth ")
            && parse_after(l, "distance ").parse::<f64>().unwrap() < distance
    });
    let nearer: f64 = parse_after(&line, "distance ").parse().unwrap();
    let steps = (distance / nearer).ln() / 1.25f64.ln();
    assert!(
        steps >= 0.999 && (steps - steps.round()).abs() < 1e-6,
        "{distance} then {line}"
    );
    check(&viewer, &line, "nearer");

    // Colour by id: the cloud's id colours only (and the background).
    let from = viewer.lines_seen();
    x.run("xdotool", &["key", "d"]);
    settled(&mut viewer, from, &|l| l.contains("points colour id "));
    let shot = viewer.screenshot(&x, None);
    let colours: std::collections::HashSet<[u8; 3]> = cloud
        .records
        .iter()
        .map(|r| [r.id_rgba[0], r.id_rgba[1], r.id_rgba[2]])
        .collect();
    let mut foreign = 0;
    for y in 0..area.1 as i64 {
        for xx in 0..area.0 as i64 {
            let c = pixel_rgb(&shot, (xx, y));
            if !close(c, [41, 41, 41], 2) && !colours.contains(&c) {
                foreign += 1;
            }
        }
    }
    assert_eq!(foreign, 0, "pixels of colours no id of the cloud has");
    viewer.key(&x, "c", |l| l.contains("points colour sample "));
    // Back to the image.
    viewer.key(&x, "p", |l| l.contains(" view composite "));
}

#[test]
fn a_cloud_beyond_the_gpu_memory_budget_keeps_every_stride_th_point_and_says_so() {
    require("xdotool", &["version"]);
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openexr/multivariate.deep.exr");
    let samples = ply_points(&file).len();
    // The two layers take 3.7 MiB each: 8 MiB leaves room for about 26,000 of 64,543 points.
    let x = Xvfb::start();
    let mut viewer = Viewer::start_with(&x, std::slice::from_ref(&file), &["--gpu-memory", "8MiB"]);
    viewer.wait_for(|l| l.starts_with("deepmerge view: drawn"));
    let from = viewer.lines_seen();
    x.run("xdotool", &["key", "p"]);
    let (_, held) = viewer.wait_for_after(from, |l| {
        l.contains("on the GPU:") && l.contains("points of")
    });
    let stride: usize = parse_after(&held, "(every ").parse().unwrap();
    let points: usize = parse_after(&held, "on the GPU: ").parse().unwrap();
    assert!(stride > 1, "{held}");
    assert_eq!(points, samples.div_ceil(stride), "{held}");
    assert!(held.contains(&format!(
        "{points} points of {samples} (every {stride} kept)"
    )));
    viewer.wait_for_after(from, |l| l.contains("points colour depth yaw 0 pitch 0 "));
}
