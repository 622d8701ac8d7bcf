"""The DAG file lexer: lines (comments, continuations, inline blocks) and words (quotes, escapes,
``key = value``), as HTCondor's ``DagLexer`` cuts them."""

from __future__ import annotations

import pytest

from htc.dag.lexer import LexError, LineReader, Words, unquote


def lines(text: str) -> list[tuple[str, int]]:
    reader = LineReader(text)
    out = []
    while (line := reader.next_line()) is not None:
        out.append((line.text, line.number))
    return out


def words(text: str, trim: bool = False) -> list[str]:
    w = Words(text)
    out = []
    while word := w.next(trim):
        out.append(word)
    return out


# --- lines --------------------------------------------------------------------------------
def test_blank_lines_and_both_comment_styles_are_skipped() -> None:
    text = "# a comment\n\n   \n// another\n  JOB A a.sub  \n\t# indented comment\nJOB B b.sub"
    assert lines(text) == [("JOB A a.sub", 5), ("JOB B b.sub", 7)]


def test_a_backslash_joins_the_next_line_and_keeps_the_first_line_number() -> None:
    text = "JOBSTATE_LOG \\\n\tlog.txt\nParent \\\n A Child \\\n B\nJOB C c.sub"
    assert lines(text) == [("JOBSTATE_LOG log.txt", 1), ("Parent A Child B", 3),
                           ("JOB C c.sub", 6)]


def test_a_backslash_on_the_last_line_continues_nothing() -> None:
    assert lines("JOB A a.sub \\") == [("JOB A a.sub", 1)]


def test_a_backslash_inside_a_line_is_not_a_continuation() -> None:
    assert lines("SCRIPT PRE A s.pl Miguel \\Indurain x") == [
        ("SCRIPT PRE A s.pl Miguel \\Indurain x", 1)]


def test_an_inline_block_is_read_raw_up_to_its_closing_token() -> None:
    reader = LineReader("JOB A {\n  executable = /bin/true\n# comment\n\n  arguments = 1\n"
                        "} DIR d NOOP\nJOB B b.sub")
    assert reader.next_line().text == "JOB A {"
    assert reader.read_block("}") == ("executable = /bin/true\narguments = 1\n", "DIR d NOOP")
    assert reader.next_line() == ("JOB B b.sub", 7)


def test_a_tagged_block_ends_at_its_tag_only() -> None:
    reader = LineReader("x\n}\n@end\nrest")
    reader.next_line()
    assert reader.read_block("@end") == ("}\n", "")
    assert reader.next_line().text == "rest"


def test_an_unclosed_block_reports_none() -> None:
    reader = LineReader("JOB A {\nexecutable = x\n")
    reader.next_line()
    assert reader.read_block("}") is None


# --- words --------------------------------------------------------------------------------
def test_spaces_and_tabs_separate_words() -> None:
    assert words("Job\tNODERET   job.cmd ") == ["Job", "NODERET", "job.cmd"]


def test_quotes_group_a_word_and_are_kept_unless_trimmed() -> None:
    assert words('JOB A "my file.sub" DIR \'a b\'') == ["JOB", "A", '"my file.sub"', "DIR",
                                                        "'a b'"]
    assert words('JOB A "my file.sub"', trim=True) == ["JOB", "A", "my file.sub"]


def test_a_backslash_in_quotes_takes_the_next_character_literally() -> None:
    assert words(r'x="Greg\"\"_LeMond" y="\\Laurent" z="Andreas\\\"_Kloden"') == [
        'x="Greg""_LeMond"', 'y="\\Laurent"', 'z="Andreas\\"_Kloden"']


def test_a_backslash_outside_quotes_is_an_ordinary_character() -> None:
    assert words(r"Miguel \Indurain") == ["Miguel", "\\Indurain"]


def test_spaces_around_the_first_equals_join_key_and_value() -> None:
    assert words('VARS A nodename = "$(JOB)" b= "2" c ="3" d') == [
        "VARS", "A", 'nodename="$(JOB)"', 'b="2"', 'c="3"', "d"]


def test_equals_inside_a_value_or_quotes_is_a_character() -> None:
    assert words('misc="!@#$%^&*()_-=+=[]{}?" a=b=c "k=v"') == [
        'misc="!@#$%^&*()_-=+=[]{}?"', "a=b=c", '"k=v"']


def test_a_quoted_value_keeps_inner_quotes_of_the_other_kind() -> None:
    assert words('''args="'Vincenzo ''The Shark'' Nibali'"''') == [
        '''args="'Vincenzo ''The Shark'' Nibali'"''']


def test_an_unclosed_quote_is_an_error_when_the_cursor_reaches_it() -> None:
    w = Words('VARS A x="abc')
    assert w.next() == "VARS" and w.next() == "A"
    with pytest.raises(LexError, match="no ending quote"):
        w.next()


def test_a_key_without_a_value_is_an_error() -> None:
    w = Words("VARS A x =")
    w.next(), w.next()
    with pytest.raises(LexError, match="no value discovered"):
        w.next()


def test_remain_is_the_raw_rest_of_the_line_and_is_never_lexed() -> None:
    w = Words('PRE A foo.sh "Cadel  Evans" \'unclosed')
    w.next(), w.next()
    assert w.remain() == "foo.sh \"Cadel  Evans\" 'unclosed"
    assert w.next() == ""


def test_remain_of_a_plain_line() -> None:
    w = Words("SET_JOB_ATTR  a  1")
    w.next()
    assert w.remain() == "a 1"


def test_peek_does_not_move_the_cursor() -> None:
    w = Words("A B")
    assert w.peek() == "A" and w.next() == "A" and w.next() == "B" and w.peek() == ""


def test_unquote() -> None:
    assert unquote('"a b"') == "a b" and unquote("'x'") == "x" and unquote("plain") == "plain"
    assert unquote('""') == "" and unquote('"') == '"'


def test_a_comment_inside_a_continuation_is_left_out() -> None:
    assert lines("JOB A \\\n# the submit file:\n  a.sub\n# c \\\nJOB B b") == [
        ("JOB A a.sub", 1), ("JOB B b", 5)]
