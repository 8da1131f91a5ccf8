//! Plain aligned text tables for terminals.

/// Renders `rows` under `headers`, columns padded to their widest cell; numbers (cells that
/// parse as such) are right-aligned.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < width.len() {
                width[i] = width[i].max(c.chars().count());
            }
        }
    }
    let numeric = |s: &str| {
        let t = s.trim_end_matches(['%', 'x', '×']).replace(',', "");
        !t.is_empty() && t.parse::<f64>().is_ok()
    };
    let mut out = String::new();
    let line = |cells: Vec<String>, out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = width[i].saturating_sub(c.chars().count());
                if numeric(c) {
                    format!("{}{c}", " ".repeat(pad))
                } else {
                    format!("{c}{}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(headers.iter().map(|s| s.to_string()).collect(), &mut out);
    line(width.iter().map(|w| "-".repeat(*w)).collect(), &mut out);
    for r in rows {
        line(r.clone(), &mut out);
    }
    out
}

/// A rate with thousands separators, e.g. `12,345,678`.
pub fn thousands(x: f64) -> String {
    let n = x.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
    }

    #[test]
    fn columns_align() {
        let t = render(
            &["name", "rate"],
            &[
                vec!["a".into(), "1,000".into()],
                vec!["bbb".into(), "5".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[2], "a     1,000");
        assert_eq!(lines[3], "bbb       5");
    }
}
