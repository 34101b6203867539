#include <stdio.h>
#include <unistd.h>
int main(void) { printf("euid=%d egid=%d\n", geteuid(), getegid()); return 0; }
