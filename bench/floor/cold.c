// Cost of touching N KiB of memory after waiting I us (cold caches after idle) against
// a pure compute loop. Usage: gcc -O2 -o cold cold.c && ./cold WAIT_US KIB [MODE]
// MODE 0 (default) sleeps through the wait; 1 spins on the clock, so that the vCPU
// never halts; 2 spins and calls sched_yield on each turn, as a polling server does.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int cmp(const void*a,const void*b){double d=*(double*)a-*(double*)b;return d<0?-1:d>0;}
int main(int c,char**v){int iv=atoi(v[1]);int kb=atoi(v[2]);int mode=c>3?atoi(v[3]):0;prctl(PR_SET_TIMERSLACK,1);
 int n=300;double w[300],w2[300];char*mem=malloc(kb*1024);for(int i=0;i<kb*1024;i++)mem[i]=i;
 volatile unsigned long s=0;
 for(int k=0;k<n;k++){
   if(mode==0){ if(iv)usleep(iv); }
   else { double e=now()+iv; while(now()<e){ if(mode==2) sched_yield(); } }
   double t0=now(); for(int i=0;i<kb*1024;i+=64)s+=mem[i]; double t1=now();
   for(unsigned long i=0;i<20000;i++){s+=i*i;}
   double t2=now(); w[k]=t1-t0; w2[k]=t2-t1;}
 qsort(w,n,8,cmp);qsort(w2,n,8,cmp);
 printf("%s %5d us: touch %d KiB p50 %.1f us; compute p50 %.1f us\n",mode==0?"sleep":mode==1?"spin":"spin+yield",iv,kb,w[n/2],w2[n/2]);}
