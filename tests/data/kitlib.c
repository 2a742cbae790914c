/* A library with its own symbol versions (KITDEMO_1.0, KITDEMO_1.2) for the RUNPATH test. */
int kitdemo_answer(void) { return 42; }
int kitdemo_answer_v2(void) { return 43; }
