// Latency floor of this machine: publisher -> relay process -> subscriber over loopback
// TCP with blocking reads and no work (the two hops of publish -> server -> subscriber).
// Usage: gcc -O2 -o relay relay.c && ./relay INTERVAL_US COUNT [MODE]   (prints p50/p90/p99 in us)
// Used for BENCHMARKS.md section 5 ("Why 10 ms intervals stay above 400 us").
// pub -> relay -> sub one-way latency over loopback TCP, three processes.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <poll.h>
#include <fcntl.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int lsn(int port){int s=socket(AF_INET,SOCK_STREAM,0);int o=1;setsockopt(s,SOL_SOCKET,SO_REUSEADDR,&o,4);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_port=htons(port);a.sin_addr.s_addr=htonl(0x7f000001);bind(s,(void*)&a,sizeof a);listen(s,8);return s;}
static int con(int port){int s=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_port=htons(port);a.sin_addr.s_addr=htonl(0x7f000001);while(connect(s,(void*)&a,sizeof a)){usleep(1000);close(s);s=socket(AF_INET,SOCK_STREAM,0);}int o=1;setsockopt(s,IPPROTO_TCP,TCP_NODELAY,&o,4);return s;}
int main(int argc,char**argv){int interval=atoi(argv[1]);int n=atoi(argv[2]);int mode=argc>3?atoi(argv[3]):0; /* mode 0: blocking read, 1: poll() then read, 2: busy-poll relay, 3: busy-poll relay and subscriber */
 int P1=41001,P2=41002;
 if(fork()==0){ // relay
   int l1=lsn(P1),l2=lsn(P2);int in=accept(l1,0,0);int out=accept(l2,0,0);int o=1;setsockopt(out,IPPROTO_TCP,TCP_NODELAY,&o,4);
   if(mode>=2) fcntl(in,F_SETFL,O_NONBLOCK);
   char b[4096];for(;;){ if(mode==1){struct pollfd p={in,POLLIN,0};poll(&p,1,-1);} int r=read(in,b,sizeof b); if(r<0&&mode>=2)continue; if(r<=0)break; write(out,b,r);} exit(0);}
 usleep(100000);
 if(fork()==0){ // sub
   int s=con(P2);if(mode==3)fcntl(s,F_SETFL,O_NONBLOCK);double v[200000];int k=0;char b[4096];for(;;){int r=read(s,b,sizeof b);if(r<0&&mode==3)continue;if(r<=0)break;double t=now();for(int i=0;i+8<=r;i+=8){double x;memcpy(&x,b+i,8);v[k++]=t-x;}}
   // sort
   int cmp(const void*a,const void*b){double d=*(double*)a-*(double*)b;return d<0?-1:d>0;}
   qsort(v+n/10,k-n/10,8,cmp);int m=k-n/10;printf("interval %d us: p50 %.1f p90 %.1f p99 %.1f (n=%d)\n",interval,v[n/10+m/2],v[n/10+m*9/10],v[n/10+m*99/100],m);exit(0);}
 int s=con(P1);usleep(100000);
 double t0=now()+1000;for(int i=0;i<n;i++){double due=t0+(double)i*interval;for(;;){double t=now();if(t>=due)break;if(due-t>300)usleep((useconds_t)(due-t-200));}
   double x=now();write(s,&x,8);}
 close(s);int st;wait(&st);wait(&st);return 0;}
