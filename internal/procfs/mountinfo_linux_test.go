package procfs

import "testing"

func TestUnescapeMount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/plain`:        "/plain",
		`/a\040b`:       "/a b",
		`/tab\011`:      "/tab\t", // at the very end
		`\040`:          " ",
		`/tab\011x`:     "/tab\tx",
		`/nl\012x`:      "/nl\nx",
		`/bs\134x`:      `/bs\x`,
		`/not\999octal`: `/not\999octal`,
		`/short\04`:     `/short\04`,
		`\040\040x`:     "  x",
		`/over\777x`:    `/over\777x`, // 511 does not fit a byte
		`/trailing\`:    `/trailing\`,
	} {
		if got := UnescapeMount(in); got != want {
			t.Errorf("UnescapeMount(%q) = %q; want %q", in, got, want)
		}
	}
}
