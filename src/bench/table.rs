//! Paper-style tables: rows are scenes, columns are engines (and, for the GL engine, layout x
//! method), every cell a value and its ratio to the worst cell of its row (worst / cell, so the
//! worst is 1.0x and larger is better), as plain aligned text or as Markdown.

use std::fmt::Write as _;

/// What the numbers of a table measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds.
    Millis,
    /// Mebibytes.
    MiB,
    /// Free text cells, no ratios (descriptive tables).
    Text,
}

/// One cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// A number in the table's unit.
    Value(f64),
    /// No number: why (e.g. `not installed`, `n/a`, `failed: ...`), or a text cell.
    Text(String),
}

/// One row: a label and one cell per column.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    /// Row label (the scene).
    pub label: String,
    /// Cells, one per column.
    pub cells: Vec<Cell>,
}

impl TableRow {
    /// The largest value in the row (the worst, for times and sizes alike).
    pub fn worst(&self) -> Option<f64> {
        self.cells
            .iter()
            .filter_map(|c| match c {
                Cell::Value(v) => Some(*v),
                Cell::Text(_) => None,
            })
            .reduce(f64::max)
    }

    /// Worst / value of cell `column`: 1.0 for the worst, more for better cells.
    pub fn ratio(&self, column: usize) -> Option<f64> {
        match (&self.cells[column], self.worst()) {
            (Cell::Value(v), Some(w)) if *v > 0.0 => Some(w / v),
            _ => None,
        }
    }
}

/// A titled table.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Title, e.g. `Table 1: merge two inputs and composite`.
    pub title: String,
    /// Unit of the values.
    pub unit: Unit,
    /// Column headers (after the row-label column).
    pub columns: Vec<String>,
    /// Header of the row-label column.
    pub row_header: String,
    /// The rows.
    pub rows: Vec<TableRow>,
    /// Lines printed under the table: what the columns include.
    pub notes: Vec<String>,
}

impl Table {
    fn cell_text(&self, row: &TableRow, column: usize) -> String {
        match &row.cells[column] {
            Cell::Text(t) => t.clone(),
            Cell::Value(v) => {
                let value = match self.unit {
                    Unit::Millis => format!("{} ms", significant(*v)),
                    Unit::MiB => format!("{} MiB", significant(*v)),
                    Unit::Text => significant(*v),
                };
                match row.ratio(column) {
                    Some(r) if self.unit != Unit::Text => format!("{value} ({r:.1}x)"),
                    _ => value,
                }
            }
        }
    }

    fn grid(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let mut header = vec![self.row_header.clone()];
        header.extend(self.columns.iter().cloned());
        let rows = self
            .rows
            .iter()
            .map(|row| {
                let mut cells = vec![row.label.clone()];
                cells.extend((0..self.columns.len()).map(|c| self.cell_text(row, c)));
                cells
            })
            .collect();
        (header, rows)
    }

    /// Aligned plain text.
    pub fn to_text(&self) -> String {
        let (header, rows) = self.grid();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = format!("{}\n", self.title);
        let _ = writeln!(out, "{}", line(&header));
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        let _ = writeln!(out, "{}", rule.join("  "));
        for row in &rows {
            let _ = writeln!(out, "{}", line(row));
        }
        for note in &self.notes {
            let _ = writeln!(out, "  {note}");
        }
        out
    }

    /// A Markdown table under a bold title, notes as a list.
    pub fn to_markdown(&self) -> String {
        let (header, rows) = self.grid();
        let mut out = format!("**{}**\n\n", self.title);
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let align: Vec<&str> = (0..header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "| {} |", align.join(" | "));
        for row in &rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }
}

/// Three significant figures, without exponent notation.
pub fn significant(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}
