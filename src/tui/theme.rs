//! Colour themes (themes/*.toml).

use ratatui::style::Color;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
];

/// Colour roles.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub syntax_theme: String,
    pub bg: Color,
    pub fg: Color,
    pub dim: Color,
    pub accent: Color,
    pub border: Color,
    pub border_focus: Color,
    pub header_bg: Color,
    pub header_fg: Color,
    pub selection_bg: Color,
    pub good: Color,
    pub warn: Color,
    pub bad: Color,
    pub info: Color,
    pub steer: Color,
    pub added: Color,
    pub removed: Color,
    pub added_bg: Color,
    pub removed_bg: Color,
    pub added_emph_bg: Color,
    pub removed_emph_bg: Color,
    pub gutter: Color,
    pub truecolor: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheme {
    name: String,
    #[serde(default)]
    syntax_theme: Option<String>,
    colors: BTreeMap<String, String>,
}

/// Whether the terminal takes 24-bit colour (COLORTERM=truecolor or 24bit).
pub fn detect_truecolor() -> bool {
    std::env::var("COLORTERM")
        .map(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("truecolor") || v.contains("24bit")
        })
        .unwrap_or(false)
}

fn parse_hex(s: &str) -> Option<(u8, u8, u8)> {
    let h = s.strip_prefix('#')?;
    if h.len() != 6 || !h.is_ascii() {
        return None;
    }
    let p = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).ok();
    Some((p(0)?, p(2)?, p(4)?))
}

/// The nearest xterm-256 colour of an RGB value (cube or grey ramp).
pub fn to_256(r: u8, g: u8, b: u8) -> u8 {
    let lvl = |c: u8| -> (u8, u8) {
        const STEPS: [u8; 6] = [0, 95, 135, 175, 215, 255];
        let mut best = 0;
        for (i, s) in STEPS.iter().enumerate() {
            if (*s as i32 - c as i32).abs() < (STEPS[best] as i32 - c as i32).abs() {
                best = i;
            }
        }
        (best as u8, STEPS[best])
    };
    let (ri, rv) = lvl(r);
    let (gi, gv) = lvl(g);
    let (bi, bv) = lvl(b);
    let cube = 16 + 36 * ri + 6 * gi + bi;
    let d = |a: u8, b: u8| (a as i32 - b as i32).pow(2);
    let cube_err = d(r, rv) + d(g, gv) + d(b, bv);
    let avg = (r as u32 + g as u32 + b as u32) / 3;
    let gi = if avg > 238 {
        23
    } else {
        (avg.saturating_sub(3)) / 10
    };
    let gv = (8 + 10 * gi) as u8;
    let grey_err = d(r, gv) + d(g, gv) + d(b, gv);
    if grey_err < cube_err {
        232 + gi as u8
    } else {
        cube
    }
}

pub fn color(rgb: (u8, u8, u8), truecolor: bool) -> Color {
    if truecolor {
        Color::Rgb(rgb.0, rgb.1, rgb.2)
    } else {
        Color::Indexed(to_256(rgb.0, rgb.1, rgb.2))
    }
}

/// A 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

fn toml_err(file: &str, text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(s) => {
            let (l, c) = line_col(text, s.start);
            format!("{file}:{l}:{c}: {}", e.message())
        }
        None => format!("{file}: {}", e.message()),
    }
}

impl Theme {
    /// Parses a theme file.
    pub fn parse(file: &str, text: &str, truecolor: bool) -> Result<Theme, String> {
        let raw: RawTheme = toml::from_str(text).map_err(|e| toml_err(file, text, &e))?;
        let get = |role: &str| -> Result<Color, String> {
            let v = raw
                .colors
                .get(role)
                .ok_or_else(|| format!("{file}: [colors] lacks `{role}`"))?;
            let rgb = parse_hex(v).ok_or_else(|| {
                let line = text
                    .lines()
                    .position(|l| l.trim_start().starts_with(role))
                    .map(|i| format!(":{}", i + 1))
                    .unwrap_or_default();
                format!("{file}{line}: `{role}` = \"{v}\" is not a #rrggbb colour")
            })?;
            Ok(color(rgb, truecolor))
        };
        Ok(Theme {
            name: raw.name.clone(),
            syntax_theme: raw
                .syntax_theme
                .clone()
                .unwrap_or_else(|| "OneHalfDark".into()),
            bg: get("bg")?,
            fg: get("fg")?,
            dim: get("dim")?,
            accent: get("accent")?,
            border: get("border")?,
            border_focus: get("border_focus")?,
            header_bg: get("header_bg")?,
            header_fg: get("header_fg")?,
            selection_bg: get("selection_bg")?,
            good: get("good")?,
            warn: get("warn")?,
            bad: get("bad")?,
            info: get("info")?,
            steer: get("steer")?,
            added: get("added")?,
            removed: get("removed")?,
            added_bg: get("added_bg")?,
            removed_bg: get("removed_bg")?,
            added_emph_bg: get("added_emph_bg")?,
            removed_emph_bg: get("removed_emph_bg")?,
            gutter: get("gutter")?,
            truecolor,
        })
    }

    /// A built-in theme ("dark", "light").
    pub fn builtin(name: &str, truecolor: bool) -> Result<Theme, String> {
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| format!("no built-in theme `{name}` (built-in: dark, light)"))?;
        Theme::parse(&format!("themes/{name}.toml"), text, truecolor)
    }

    /// A theme by name: built-in, else `<config dir>/atrex-tui/themes/NAME.toml`, else a path.
    pub fn load(name: &str, truecolor: bool) -> Result<Theme, String> {
        if BUILTIN.iter().any(|(n, _)| *n == name) {
            return Theme::builtin(name, truecolor);
        }
        let mut candidates = Vec::new();
        if let Some(d) = crate::config::config_dir() {
            candidates.push(d.join("themes").join(format!("{name}.toml")));
        }
        candidates.push(PathBuf::from(name));
        for c in candidates {
            if c.is_file() {
                let text =
                    std::fs::read_to_string(&c).map_err(|e| format!("{}: {e}", c.display()))?;
                return Theme::parse(&c.display().to_string(), &text, truecolor);
            }
        }
        Err(format!(
            "unknown theme `{name}` (built-in: dark, light; or a file in the config directory's themes/)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{Color, Theme, to_256};

    #[test]
    fn builtin_themes_parse_in_both_colour_modes() {
        for name in ["dark", "light"] {
            let t = Theme::builtin(name, true).unwrap();
            assert!(matches!(t.bg, Color::Rgb(..)));
            let t = Theme::builtin(name, false).unwrap();
            assert!(matches!(t.bg, Color::Indexed(_)));
        }
        assert_eq!(to_256(255, 0, 0), 196);
        assert_eq!(to_256(0, 0, 0), 16);
        assert_eq!(to_256(128, 128, 128), 244);
    }

    #[test]
    fn a_bad_theme_names_file_and_line() {
        let e =
            Theme::parse("t.toml", "name = \"x\"\n[colors]\nbg = \"blue\"\n", true).unwrap_err();
        assert!(e.contains("t.toml:3") && e.contains("bg"), "{e}");
    }
}
