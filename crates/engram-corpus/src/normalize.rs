//! Text normalization applied to every document body: line ends unified, control characters
//! removed, trailing spaces trimmed, runs of blank lines collapsed to one.

/// `text` normalized (see the module docs).
pub fn normalize(text: &str) -> String {
    let unified = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(unified.len());
    let mut blank_run = 0;
    for line in unified.split('\n') {
        let line: String = line
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim().to_string()
}

/// Lower-case words (runs of alphanumeric characters) of `text`.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ends_controls_and_blank_runs() {
        assert_eq!(
            normalize("  Hi\r\n\r\n\r\n\r\nthere \u{0}\u{7}x\t\rend  \n\n"),
            "Hi\n\nthere x\nend"
        );
        let w: Vec<String> = words("Re: It's 5 o'clock—ÉTÉ!").collect();
        assert_eq!(w, ["re", "it", "s", "5", "o", "clock", "été"]);
    }
}
