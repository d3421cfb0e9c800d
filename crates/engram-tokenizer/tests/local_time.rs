//! `strftime_now` gives the local time, as transformers' `datetime.now()` does: a template that
//! writes today's date (Llama 3.2's "Today Date") must write the date of the machine's zone, not
//! UTC's, or prompts differ from `apply_chat_template`'s for part of every day. Its own test
//! binary: it sets `TZ` before anything reads it.

#[test]
fn strftime_now_follows_the_local_time_zone() {
    // SAFETY: the only test of this binary, before any thread reads the environment.
    // A POSIX zone string: read without tzdata.
    unsafe { std::env::set_var("TZ", "ENG+12") };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // POSIX's sign: ENG+12 is twelve hours behind UTC.
    assert_eq!(engram_tokenizer::utc_offset(now), -12 * 3600);
    let local = engram_tokenizer::strftime(now - 12 * 3600, "%d %b %Y %H");
    let got = engram_tokenizer::strftime_now("%d %b %Y %H");
    // Unless the hour turned between the two readings.
    let later = engram_tokenizer::strftime(now + 60 - 12 * 3600, "%d %b %Y %H");
    assert!(got == local || got == later, "{got} vs {local}");
}
