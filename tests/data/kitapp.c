#include <stdio.h>
int kitdemo_answer(void);
int kitdemo_answer_v2(void);
int main(void) { printf("%d %d\n", kitdemo_answer(), kitdemo_answer_v2()); return 0; }
