/* noop: the smallest program, for start-up measurements. */
int main(void)
{
    return 0;
}
